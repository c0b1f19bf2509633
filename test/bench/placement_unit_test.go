// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package bench

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-sched/sluice/internal/benchfmt"
)

func newTestRecorder() *placementRecorder {
	return &placementRecorder{
		leaf: map[string]string{}, spine: map[string]string{}, free: map[string]int64{},
		nodeOK: map[string]bool{}, bound: map[types.UID]bool{}, gangs: map[string]*gangPlacement{},
	}
}

func gpuNode(name, leaf, spine string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{leafLabel: leaf, spineLabel: spine}},
		Status:     v1.NodeStatus{Allocatable: v1.ResourceList{gpuResource: resource.MustParse("8")}},
	}
}

func boundPod(name, node, gang string, size int) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: map[string]string{}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{gpuResource: resource.MustParse("8")}},
		}}},
	}
	if gang != "" {
		p.Labels[gangLabel], p.Labels[gangSizeLabel] = gang, fmt.Sprint(size)
	}
	return p
}

// TestPlacementRecorder: a gang's lower bound is the fewest leaves whose
// whole free nodes held it when its first member was bound, and the
// summary counts the leaves it spans against it.
func TestPlacementRecorder(t *testing.T) {
	r := newTestRecorder()
	// Leaf a: 4 nodes, b: 3, c: 2 (spine x holds a and b, y holds c).
	for i := range 4 {
		r.node(gpuNode(fmt.Sprintf("a%d", i), "a", "x"))
	}
	for i := range 3 {
		r.node(gpuNode(fmt.Sprintf("b%d", i), "b", "x"))
	}
	for i := range 2 {
		r.node(gpuNode(fmt.Sprintf("c%d", i), "c", "y"))
	}
	// A fill pod takes a0: a has 3 free nodes, b 3, c 2.
	r.pod(boundPod("fill", "a0", "", 0))
	r.pod(boundPod("fill", "a0", "", 0)) // seen twice, counted once
	if got := r.lowerBound(5); got != 2 {
		t.Errorf("lowerBound(5) = %d, want 2 (3 + 3 free nodes)", got)
	}
	if got := r.lowerBound(9); got != 0 {
		t.Errorf("lowerBound(9) = %d with 8 free nodes, want 0 (cannot be held)", got)
	}
	// Gang g (4 nodes, bound 2) placed on a1, a2, b0, c0: 3 leaves, 2 spines.
	for i, n := range []string{"a1", "a2", "b0", "c0"} {
		r.pod(boundPod(fmt.Sprintf("g-%d", i), n, "g", 4))
	}
	// Gang h (2 nodes, bound 1 then: a3 or b1+b2) placed on b1, b2.
	r.pod(boundPod("h-0", "b1", "h", 2))
	r.pod(boundPod("h-1", "b2", "h", 2))
	// Gang k is not complete: left out.
	r.pod(boundPod("k-0", "a3", "k", 2))
	s := r.summary("w")
	want := []benchfmt.GangSpread{
		{Nodes: 2, Gangs: 1, Leaves: 1, Spines: 1, LowerBound: 1, AtBound: 1},
		{Nodes: 4, Gangs: 1, Leaves: 3, Spines: 2, LowerBound: 2, AtBound: 0},
	}
	if fmt.Sprint(s.BySize) != fmt.Sprint(want) {
		t.Errorf("summary %+v, want %+v", s.BySize, want)
	}
}
