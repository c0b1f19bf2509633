// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// index is what live claims hold, kept as claims change: each record's
// share is computed from that record alone when it changes, and the
// totals are changed by the difference, so a write to one record of a
// claim of 50,000 victims costs its own 500, not the claim's (nor every
// claim's). Guarded by Store.mu.
type index struct {
	// by is each record's share, by namespace/name.
	by map[string]*share
	// claimedBy counts, per node, the records that free it or nominate a
	// claimant to it; claimed is its key set, replaced (never changed in
	// place) when a node comes or goes.
	claimedBy map[string]int
	claimed   sets.Set[string]
	// held is the overflow room live records hold, by provider.
	held map[overflow.Target]capacity.Resources
	// watching maps what a record's sync reads (Watch keys) to the
	// records that read it.
	watching map[string]sets.Set[string]
	// records are each claim's records, first first, by recordsKey.
	records map[string][]*v1alpha1.ResearchClaim
}

// share is what one record holds.
type share struct {
	claim *v1alpha1.ResearchClaim
	nodes []string
	held  map[overflow.Target]capacity.Resources
	// evicted are, per controller, the reservations of its victims
	// evicted and not yet replaced (a replacement of the controller may
	// take one).
	evicted map[types.UID][]overflow.Reservation
	watch   []string
}

// shareOf computes what c holds: nothing but its watch keys once it is
// given up.
func shareOf(c *v1alpha1.ResearchClaim) *share {
	sh := &share{claim: c, held: map[overflow.Target]capacity.Resources{}, evicted: map[types.UID][]overflow.Reservation{}}
	watch := sets.New[string]()
	for _, cl := range c.Spec.Claimants {
		watch.Insert(PodKey(cl.UID))
	}
	for _, v := range c.Spec.Victims {
		watch.Insert(PodKey(v.UID), OwnerKey(v.Owner.UID), BudgetKey(v.Budget), NodeKey(v.Target.Node))
	}
	sh.watch = sets.List(watch)
	if !Live(c) {
		return sh
	}
	nodes := sets.New[string]()
	for _, cl := range c.Spec.Claimants {
		nodes.Insert(cl.Node)
	}
	replaced := sets.New(c.Status.Replaced...)
	gone := sets.New[types.UID]()
	for _, ev := range c.Status.Evicted {
		gone.Insert(ev.UID)
	}
	for _, v := range c.Spec.Victims {
		if replaced.Has(v.UID) {
			continue
		}
		nodes.Insert(v.Node)
		req := capacity.ResourcesOf(v.Requests)
		req.Pods = 1
		t := overflow.Target{Node: v.Target.Node, Provider: v.Target.Provider}
		sh.held[t] = addInto(sh.held[t], req)
		if gone.Has(v.UID) {
			sh.evicted[v.Owner.UID] = append(sh.evicted[v.Owner.UID], overflow.Reservation{Target: t, Requests: req})
		}
	}
	sh.nodes = sets.List(nodes)
	return sh
}

// addInto adds o to r in place (r's map is its own) and returns it.
func addInto(r, o capacity.Resources) capacity.Resources {
	r.MilliCPU, r.Memory, r.Pods = r.MilliCPU+o.MilliCPU, r.Memory+o.Memory, r.Pods+o.Pods
	if r.Scalar == nil {
		r.Scalar = map[v1.ResourceName]int64{}
	}
	for k, v := range o.Scalar {
		r.Scalar[k] += v
	}
	return r
}

// put replaces key's share with sh (nil: the record is gone), changing
// the totals by the difference.
func (x *index) put(key string, sh *share) {
	if x.by == nil {
		*x = index{by: map[string]*share{}, claimedBy: map[string]int{}, claimed: sets.New[string](),
			held: map[overflow.Target]capacity.Resources{}, watching: map[string]sets.Set[string]{}, records: map[string][]*v1alpha1.ResearchClaim{}}
	}
	old := x.by[key]
	if old != nil {
		x.apply(key, old, -1)
	}
	if sh == nil {
		delete(x.by, key)
	} else {
		x.by[key] = sh
		x.apply(key, sh, 1)
	}
}

// apply adds (sign 1) or takes away (-1) a share from the totals.
func (x *index) apply(key string, sh *share, sign int) {
	changed := false
	for _, n := range sh.nodes {
		before := x.claimedBy[n]
		x.claimedBy[n] += sign
		if x.claimedBy[n] <= 0 {
			delete(x.claimedBy, n)
		}
		changed = changed || (before == 0) != (x.claimedBy[n] == 0)
	}
	if changed {
		x.claimed = sets.KeySet(x.claimedBy)
	}
	for t, r := range sh.held {
		if sign < 0 {
			x.held[t] = x.held[t].Sub(r)
		} else {
			x.held[t] = x.held[t].Add(r)
		}
		if x.held[t].Pods == 0 {
			delete(x.held, t)
		}
	}
	for _, k := range sh.watch {
		if sign > 0 {
			if x.watching[k] == nil {
				x.watching[k] = sets.New[string]()
			}
			x.watching[k].Insert(key)
		} else if w := x.watching[k]; w != nil {
			w.Delete(key)
			if w.Len() == 0 {
				delete(x.watching, k)
			}
		}
	}
	rk := recordsKey(sh.claim)
	records := slices.DeleteFunc(slices.Clone(x.records[rk]), func(r *v1alpha1.ResearchClaim) bool {
		return r.Namespace+"/"+r.Name == key
	})
	if sign > 0 {
		records = append(records, sh.claim)
		slices.SortFunc(records, func(a, b *v1alpha1.ResearchClaim) int { return a.RecordIndex() - b.RecordIndex() })
	}
	if len(records) == 0 {
		delete(x.records, rk)
	} else {
		x.records[rk] = records
	}
}

// indexObj indexes a claim the informer added or changed (or the engine
// just wrote).
func (s *Store) indexObj(obj any) {
	c, ok := obj.(*v1alpha1.ResearchClaim)
	if !ok {
		return
	}
	sh := shareOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx.put(c.Namespace+"/"+c.Name, sh)
}

// unindexObj drops a claim the informer deleted.
func (s *Store) unindexObj(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if c, ok := obj.(*v1alpha1.ResearchClaim); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.idx.put(c.Namespace+"/"+c.Name, nil)
	}
}

// reindex rebuilds the index from every claim in the store.
func (s *Store) reindex() {
	shares := map[string]*share{}
	for _, c := range s.List() {
		shares[c.Namespace+"/"+c.Name] = shareOf(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx = index{}
	for key, sh := range shares {
		s.idx.put(key, sh)
	}
}

// ClaimedNodes is every node NodeClaimed reports. The set is replaced when
// claims change, never changed in place: a caller may keep it for a
// scheduling cycle, and must not change it.
func (s *Store) ClaimedNodes() sets.Set[string] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx.claimed == nil {
		return sets.New[string]()
	}
	return s.idx.claimed
}

// Reservations is the overflow room live claims hold, one reservation per
// provider.
func (s *Store) Reservations() []overflow.Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]overflow.Reservation, 0, len(s.idx.held))
	for t, r := range s.idx.held {
		out = append(out, overflow.Reservation{Target: t, Requests: r})
	}
	return out
}

// Watch keys name what a claim's sync reads, so that a change to one syncs
// only the claims that read it: its claimants and victims (PodKey), its
// victims' controllers (OwnerKey: their replacements, a default budget's
// pods), budgets (BudgetKey) and overflow nodes (NodeKey).
func PodKey(uid types.UID) string    { return "pod/" + string(uid) }
func OwnerKey(uid types.UID) string  { return "owner/" + string(uid) }
func BudgetKey(budget string) string { return "budget/" + budget }
func NodeKey(node string) string     { return "node/" + node }

// Watching lists, once each, the claims (namespace/name) that read any
// of keys.
func (s *Store) Watching(keys ...string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range keys {
		for c := range s.idx.watching[k] {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// ReservationsFor is the overflow room live claims hold, by provider, for
// a pod of the controller with UID owner: less, at each provider, one
// reservation of a victim of that controller evicted and not yet
// replaced, which the pod may take as its replacement.
func (s *Store) ReservationsFor(owner types.UID) []overflow.Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := maps.Clone(s.idx.held)
	seen := map[overflow.Target]bool{}
	for _, sh := range s.idx.by {
		for _, r := range sh.evicted[owner] {
			if !seen[r.Target] {
				seen[r.Target] = true
				held[r.Target] = held[r.Target].Sub(r.Requests)
			}
		}
	}
	out := make([]overflow.Reservation, 0, len(held))
	for t, req := range held {
		out = append(out, overflow.Reservation{Target: t, Requests: req})
	}
	return out
}

// RecordsOf is every record of c's claim that the store holds, the first
// first (c among them, as stored). The slice is replaced when records
// change, never changed in place; a caller must not change it.
func (s *Store) RecordsOf(c *v1alpha1.ResearchClaim) []*v1alpha1.ResearchClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.records[recordsKey(c)]
}
