// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// nodeResourcesFit is upstream's NodeResourcesFit, PreFilter then Filter,
// as the scheduler runs it for a pod on a node.
func nodeResourcesFit(t *testing.T) func(*v1.Pod, fwk.NodeInfo) *fwk.Status {
	ctx := context.Background()
	fitArgs := &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
		Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}}}}
	fit, err := noderesources.NewFit(ctx, fitArgs, handle{}, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	return func(incoming *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
		state := framework.NewCycleState()
		if _, s := fit.(fwk.PreFilterPlugin).PreFilter(ctx, state, incoming, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		return fit.(fwk.FilterPlugin).Filter(ctx, state, incoming, ni)
	}
}

// TestFilterRejectsAsNodeResourcesFit: for a pod that asks for GPUs, Filter
// turns away exactly the nodes NodeResourcesFit turns away for want of
// GPUs, with its code (Unschedulable, or UnschedulableAndUnresolvable when
// the node has fewer GPUs in all than asked) and its reason, and passes
// every node NodeResourcesFit passes; so too on the nodes preemption
// simulates, with the pods of lower priority removed. Random nodes (8, 4 or
// no GPUs) and pods, some of them full on CPU as well.
func TestFilterRejectsAsNodeResourcesFit(t *testing.T) {
	ctx := context.Background()
	fitStatus := nodeResourcesFit(t)
	rng := rand.New(rand.NewPCG(5, 6))
	serial := 0
	newPod := func(node string, gpus []int) *v1.Pod {
		serial++
		name := fmt.Sprintf("p%d", serial)
		req := map[v1.ResourceName]string{"cpu": fmt.Sprint(1 + rng.IntN(8))}
		if rng.IntN(5) > 0 {
			req["nvidia.com/gpu"] = fmt.Sprint(gpus[rng.IntN(len(gpus))])
		}
		return withPriority(st.MakePod().Name(name).Namespace("ns").UID(name).Node(node).Req(req).Obj(), []int32{100, 10000}[rng.IntN(2)])
	}
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 40 {
		name := fmt.Sprintf("n%02d", i)
		capacity := map[v1.ResourceName]string{"cpu": "16", "memory": "64Gi", "pods": "110"}
		if gpus := []string{"8", "8", "4", ""}[rng.IntN(4)]; gpus != "" {
			capacity["nvidia.com/gpu"] = gpus
		}
		nodes = append(nodes, st.MakeNode().Name(name).Label("leaf", fmt.Sprintf("leaf-%d", i/8)).Capacity(capacity).Obj())
		for range rng.IntN(4) {
			running = append(running, newPod(name, []int{1, 2, 4}))
		}
	}
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	rejected := map[fwk.Code]int{}
	check := func(round int, incoming *v1.Pod, state fwk.CycleState, ni fwk.NodeInfo, what string) {
		got, want := pl.Filter(ctx, state, incoming, ni), fitStatus(incoming, ni)
		gpuShort := !want.IsSuccess() && slices.Contains(want.Reasons(), "Insufficient nvidia.com/gpu")
		switch {
		case got.IsSuccess() && gpuShort:
			t.Fatalf("round %d, %s %s: Filter passes a node NodeResourcesFit turns away: %v", round, what, ni.Node().Name, want)
		case !got.IsSuccess() && !gpuShort:
			t.Fatalf("round %d, %s %s: Filter = %v where NodeResourcesFit = %v", round, what, ni.Node().Name, got, want)
		case !got.IsSuccess() && (got.Code() != want.Code() || !slices.Equal(got.Reasons(), []string{"Insufficient nvidia.com/gpu"})):
			t.Fatalf("round %d, %s %s: Filter = %v, want NodeResourcesFit's code and GPU reason: %v", round, what, ni.Node().Name, got, want)
		}
		if !got.IsSuccess() {
			rejected[got.Code()]++
		}
	}
	for round := range 200 {
		incoming := newPod("", []int{1, 2, 4, 8, 16})
		if incoming.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", "").IsZero() {
			continue
		}
		state := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, state, incoming, infos); !s.IsSuccess() {
			t.Fatalf("round %d: PreFilter of a pod that asks for GPUs = %v, want Success (Filter checks room)", round, s)
		}
		for _, ni := range infos {
			check(round, incoming, state, ni, "node")
			// What preemption simulates: the pods of lower priority gone.
			after := framework.NewNodeInfo()
			after.SetNode(ni.Node())
			for _, p := range ni.GetPods() {
				if *p.GetPod().Spec.Priority >= *incoming.Spec.Priority {
					after.AddPod(p.GetPod())
				}
			}
			check(round, incoming, state, after, "node without lower priority pods")
		}
	}
	if rejected[fwk.Unschedulable] < 100 || rejected[fwk.UnschedulableAndUnresolvable] < 100 {
		t.Fatalf("Filter turned nodes away %v: too few of each code to check", rejected)
	}
	t.Logf("Filter turned nodes away %v", rejected)
}

// TestFilterLeavesResizesToNodeResourcesFit: a pod already bound (an in-place
// resize, which NodeResourcesFit checks by the change alone) is not checked
// for GPU room, nor is a pod that asks for no GPU.
func TestFilterLeavesResizesToNodeResourcesFit(t *testing.T) {
	nodes := []*v1.Node{node("n0", "l0")}
	pl, snapshot := newPlugin(t, nodes, []*v1.Pod{pod("big", "n0", "production", "8")})
	ni, err := snapshot.Get("n0")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{pod("big", "n0", "production", "8"), cpuPod("cpu", "production")} {
		state := framework.NewCycleState()
		_, status := pl.PreFilter(t.Context(), state, p, nil)
		if status.IsSkip() {
			continue
		}
		if status := pl.Filter(t.Context(), state, p, ni); !status.IsSuccess() {
			t.Errorf("Filter(%s, n0) = %v, want Success", p.Name, status)
		}
	}
	// The same pod not yet bound is turned away: n0's GPUs are taken.
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(t.Context(), state, pod("more", "", "production", "8"), nil); !status.IsSuccess() {
		t.Fatalf("PreFilter = %v, want Success", status)
	}
	if status := pl.Filter(t.Context(), state, pod("more", "", "production", "8"), ni); status.Code() != fwk.Unschedulable {
		t.Errorf("Filter(more, n0) = %v, want Unschedulable", status)
	}
}
