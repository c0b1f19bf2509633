// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// victims are n victims listed node by node, 8 a node, each of another of
// owners controllers (the planner's order).
func victims(n, owners int) []Victim {
	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")}
	var out []Victim
	for i := range n {
		d := (i * 37) % owners
		rs := fmt.Sprintf("prod-%d-7596c99797", d)
		out = append(out, Victim{Namespace: "production-0", Name: fmt.Sprintf("%s-%05d", rs, i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Node: fmt.Sprintf("gpu-%d", i/8), Owner: Owner{Kind: "ReplicaSet", Name: rs, UID: types.UID(fmt.Sprintf("rs-%d", d))},
			Budget: "default/production-0/ReplicaSet/" + rs, Target: Target{Node: "overflow-0", Provider: "a"}, Requests: requests})
	}
	return out
}

// TestPackRoundTrip: a claim read back has the victims it was written
// with, each controller's in their order, and one group per controller.
func TestPackRoundTrip(t *testing.T) {
	c := &ResearchClaim{Spec: ResearchClaimSpec{Key: "k", Victims: victims(64, 5)}}
	c.Spec.Victims[3].Target.Provider = "b" // another target: another group
	obj, err := c.ToUnstructured()
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(back.Spec.VictimGroups); got != 6 {
		t.Errorf("%d groups, want 6 (5 controllers, one with two targets)", got)
	}
	byGroup := func(vs []Victim) map[string][]Victim {
		out := map[string][]Victim{}
		for _, v := range vs {
			k := string(v.Owner.UID) + "/" + v.Target.Provider
			out[k] = append(out[k], v)
		}
		return out
	}
	if d := cmp.Diff(byGroup(c.Spec.Victims), byGroup(back.Spec.Victims)); d != "" {
		t.Errorf("victims read back differ (-written +read):\n%s", d)
	}
	if len(c.Spec.VictimGroups) != 0 {
		t.Error("ToUnstructured changed the claim it was given")
	}
}

// TestLargeClaimIsSmall: a claim of 4,096 victims of 100 controllers is
// stored in well under etcd's request limit (1.5 MiB), leaving room for
// its status; stored flat it would be past the limit.
func TestLargeClaimIsSmall(t *testing.T) {
	c := &ResearchClaim{Spec: ResearchClaimSpec{Key: "k", Victims: victims(4096, 100)}}
	obj, err := c.ToUnstructured()
	if err != nil {
		t.Fatal(err)
	}
	packed, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := json.Marshal(c.Spec.Victims)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("4096 victims: %d bytes stored, %d flat", len(packed), len(flat))
	if len(packed) > 512<<10 {
		t.Errorf("a claim of 4096 victims takes %d bytes, want at most 512 KiB", len(packed))
	}
}

// TestRecordsOfAClaim: records are named and placed by RecordName and
// RecordIndex, and a claim's phase is its records' together.
func TestRecordsOfAClaim(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: SchemeGroupVersion.String(), Kind: Kind, Name: "rc-a"}
	record := func(i int, phase Phase) *ResearchClaim {
		c := &ResearchClaim{ObjectMeta: metav1.ObjectMeta{Name: RecordName("rc-a", i)}}
		if i > 1 {
			c.OwnerReferences = []metav1.OwnerReference{owner}
		}
		c.Spec.Records, c.Status.Phase = 3, phase
		return c
	}
	for i := 1; i <= 3; i++ {
		if got := record(i, "").RecordIndex(); got != i {
			t.Errorf("record %d: RecordIndex %d", i, got)
		}
	}
	stray := &ResearchClaim{ObjectMeta: metav1.ObjectMeta{Name: "rc-a-x", OwnerReferences: []metav1.OwnerReference{owner}}}
	if got := stray.RecordIndex(); got != 0 {
		t.Errorf("a record named %s: RecordIndex %d, want 0", stray.Name, got)
	}
	for _, tc := range []struct {
		phases []Phase
		want   Phase
	}{
		{[]Phase{PhaseFreed, PhaseFreed, PhaseFreed}, PhaseFreed},
		{[]Phase{PhaseFreed, PhaseFreed}, PhaseEvicting}, // a record missing
		{[]Phase{PhaseFreed, PhaseGivenUp, PhaseEvicting}, PhaseGivenUp},
		{[]Phase{PhasePaused, PhaseFreed, PhasePaused}, PhasePaused},
		{[]Phase{PhasePaused, "", PhaseFreed}, PhaseEvicting},
	} {
		var records []*ResearchClaim
		for i, p := range tc.phases {
			records = append(records, record(i+1, p))
		}
		if got := ClaimPhase(records); got != tc.want {
			t.Errorf("records %v: ClaimPhase %q, want %q", tc.phases, got, tc.want)
		}
	}
}
