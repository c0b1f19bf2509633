// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
)

// A claim of more victims than one object holds is recorded in several
// ResearchClaims (spec.records): each carries a run of the victims, and
// the engine carries each out on its own, the budgets they share counted
// by the disruption ledger. What belongs to the whole claim is decided
// over all its records: its progress (the latest of theirs), whether it
// is Freed (every record is) or given up (one is), and what its
// claimants are told (by the first record alone).

// Split divides claim c into the records that hold it: c itself when it
// has at most v1alpha1.MaxVictimsPerRecord victims; otherwise c with the
// first run of victims, then "<c.Name>-2" and on, each with the next run.
// Every record carries the whole spec but the victims, and spec.records.
// The records after the first get their owner (the first) once it is
// created (CreateClaim).
func Split(c *v1alpha1.ResearchClaim) []*v1alpha1.ResearchClaim {
	n := (len(c.Spec.Victims) + v1alpha1.MaxVictimsPerRecord - 1) / v1alpha1.MaxVictimsPerRecord
	if n <= 1 {
		return []*v1alpha1.ResearchClaim{c}
	}
	out := make([]*v1alpha1.ResearchClaim, 0, n)
	bare := *c
	bare.Spec.Victims, bare.Spec.VictimGroups = nil, nil
	for i := range n {
		r := bare.DeepCopy()
		r.Spec.Records = int32(n)
		r.Spec.Victims = slices.Clone(c.Spec.Victims[i*v1alpha1.MaxVictimsPerRecord : min((i+1)*v1alpha1.MaxVictimsPerRecord, len(c.Spec.Victims))])
		if i > 0 {
			r.Name = v1alpha1.RecordName(c.Name, i+1)
			r.Annotations = nil
		}
		out = append(out, r)
	}
	return out
}

// CreateClaim records claim c in the apiserver, in as many records as
// Split makes, and returns the first. The records after the first are
// owned by it, so they go with it. If one cannot be written, the records
// written are deleted and the error returned: a claim is recorded whole
// or not at all (a claim missing a record is never Freed, see Freed).
func (s *Store) CreateClaim(ctx context.Context, c *v1alpha1.ResearchClaim) (*v1alpha1.ResearchClaim, error) {
	records := Split(c)
	first, err := s.Create(ctx, records[0])
	if err != nil || len(records) == 1 {
		return first, err
	}
	if first.Spec.Records != int32(len(records)) {
		// The apiserver pruned spec.records: its CRD predates them, and
		// each record would be taken for a whole claim.
		err := fmt.Errorf("claim %s needs %d records, but the ResearchClaim CRD installed drops spec.records: install manifests/crds of this version", first.Name, len(records))
		if derr := s.Delete(ctx, first.Namespace, first.Name); derr != nil {
			err = fmt.Errorf("%w; and deleting it: %v", err, derr)
		}
		return nil, err
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind, Name: first.Name, UID: first.UID}
	for _, r := range records[1:] {
		r.OwnerReferences = []metav1.OwnerReference{owner}
		if _, err := s.Create(ctx, r); err != nil {
			err = fmt.Errorf("recording %s, record %d of %d of claim %s: %w", r.Name, r.RecordIndex(), len(records), first.Name, err)
			if derr := s.DeleteClaim(ctx, first); derr != nil {
				err = fmt.Errorf("%w; and deleting the records already written: %v", err, derr)
			}
			return nil, err
		}
	}
	return first, nil
}

// DeleteClaim deletes every record of c's claim: the first last, so that
// what it owns is not left to the garbage collector alone.
func (s *Store) DeleteClaim(ctx context.Context, c *v1alpha1.ResearchClaim) error {
	n := max(int(c.Spec.Records), 1)
	first := firstName(c)
	for i := n; i >= 1; i-- {
		if err := s.Delete(ctx, c.Namespace, v1alpha1.RecordName(first, i)); err != nil {
			return err
		}
	}
	return nil
}

// First reports whether c is its claim's first record (the one named
// after the claimant; a claim of one record is its own first).
func First(c *v1alpha1.ResearchClaim) bool {
	_, first := c.FirstRecord()
	return first
}

func firstName(c *v1alpha1.ResearchClaim) string {
	name, _ := c.FirstRecord()
	return name
}

// recordsKey groups a claim's records in the store's index.
func recordsKey(c *v1alpha1.ResearchClaim) string { return c.Namespace + "/" + firstName(c) }

// Whole reports whether records (RecordsOf) are all of their claim's.
func Whole(records []*v1alpha1.ResearchClaim) bool {
	return len(records) > 0 && len(records) == max(int(records[0].Spec.Records), 1) && First(records[0])
}

// Freed reports whether the claim named name (its first record) is
// recorded whole and every record is Freed: the room is free.
func (s *Store) Freed(namespace, name string) bool {
	c, ok := s.Get(namespace, name)
	if !ok {
		return false
	}
	records := s.RecordsOf(c)
	if !Whole(records) {
		return false
	}
	for _, r := range records {
		if r.Status.Phase != v1alpha1.PhaseFreed {
			return false
		}
	}
	return true
}

// claimStatus is the whole claim's phase and message, from its records
// (with c, just decided, in place of its stored self): given up if one
// is, Freed if every record is and the claim is whole, Paused if a record
// is and none evicts, Evicting otherwise; a claim of one record says what
// the record says.
func claimStatus(records []*v1alpha1.ResearchClaim, c *v1alpha1.ResearchClaim) (v1alpha1.Phase, string) {
	if len(records) <= 1 && max(c.Spec.Records, 1) == 1 {
		return c.Status.Phase, c.Status.Message
	}
	now := make([]*v1alpha1.ResearchClaim, len(records))
	victims, moved, counts := 0, 0, map[v1alpha1.Phase]int{}
	var paused, givenUp string
	for i, r := range records {
		if r.Name == c.Name {
			r = c
		}
		now[i] = r
		victims += len(r.Spec.Victims)
		moved += len(r.Status.Replaced)
		counts[r.Status.Phase]++
		switch {
		case r.Status.Phase == v1alpha1.PhaseGivenUp && givenUp == "":
			givenUp = r.Status.Message
		case r.Status.Phase == v1alpha1.PhasePaused && paused == "":
			paused = r.Status.Message
		}
	}
	summary := fmt.Sprintf("%d records of %d: %d of %d production pods moved", len(records), max(c.Spec.Records, 1), moved, victims)
	switch phase := v1alpha1.ClaimPhase(now); phase {
	case v1alpha1.PhaseGivenUp:
		return phase, summary + "; given up: " + givenUp
	case v1alpha1.PhaseFreed:
		return phase, summary
	case v1alpha1.PhasePaused:
		return phase, fmt.Sprintf("%s; %d records paused, first: %s", summary, counts[v1alpha1.PhasePaused], paused)
	default:
		return phase, fmt.Sprintf("%s; %d records evicting, %d paused, %d freed", summary, len(records)-counts[v1alpha1.PhasePaused]-counts[v1alpha1.PhaseFreed], counts[v1alpha1.PhasePaused], counts[v1alpha1.PhaseFreed])
	}
}

// progressOf is when the claim last moved forward: the latest progress of
// its records (c, just decided, in place of its stored self), or its
// creation. A record waiting on a budget does not time out while another
// record of its claim moves.
func progressOf(records []*v1alpha1.ResearchClaim, c *v1alpha1.ResearchClaim) time.Time {
	at := func(r *v1alpha1.ResearchClaim) time.Time {
		if !r.Status.ProgressTime.IsZero() {
			return r.Status.ProgressTime.Time
		}
		return r.CreationTimestamp.Time
	}
	latest := at(c)
	for _, r := range records {
		if r.Name != c.Name {
			latest = later(latest, at(r))
		}
	}
	return latest
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// givenUpRecord is another record of c's claim that was given up, if one
// is: c follows it.
func givenUpRecord(records []*v1alpha1.ResearchClaim, c *v1alpha1.ResearchClaim) *v1alpha1.ResearchClaim {
	for _, r := range records {
		if r.Name != c.Name && !Live(r) {
			return r
		}
	}
	return nil
}

// view is the whole claim as its claimants are told of it: the first
// record's owners, the claim's phase and message (claimStatus).
func view(records []*v1alpha1.ResearchClaim, c *v1alpha1.ResearchClaim) *v1alpha1.ResearchClaim {
	if len(records) <= 1 && max(c.Spec.Records, 1) == 1 {
		return c
	}
	v := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: firstName(c)}, Spec: c.Spec}
	if len(records) > 0 && First(records[0]) {
		v.OwnerReferences = records[0].OwnerReferences
	} else if First(c) {
		v.OwnerReferences = c.OwnerReferences
	}
	v.Status.Phase, v.Status.Message = claimStatus(records, c)
	return v
}

// victimsOf counts the victims of every record.
func victimsOf(records []*v1alpha1.ResearchClaim, c *v1alpha1.ResearchClaim) int {
	n := len(c.Spec.Victims)
	for _, r := range records {
		if r.Name != c.Name {
			n += len(r.Spec.Victims)
		}
	}
	return n
}
