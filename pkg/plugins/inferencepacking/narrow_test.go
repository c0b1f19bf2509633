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
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func withPriority(p *v1.Pod, priority int32) *v1.Pod {
	p.Spec.Priority = &priority
	return p
}

// preFilterNames runs PreFilter and returns the nodes it named, nil for
// every node.
func preFilterNames(t *testing.T, pl *InferencePacking, incoming *v1.Pod, infos []fwk.NodeInfo) []string {
	t.Helper()
	result, s := pl.PreFilter(context.Background(), framework.NewCycleState(), incoming, infos)
	if !s.IsSuccess() && !s.IsSkip() {
		t.Fatalf("PreFilter: %v", s)
	}
	if result.AllNodes() {
		return nil
	}
	if s.IsSkip() {
		t.Fatalf("PreFilter named nodes %v but skipped: the scheduler drops the names of a plugin that skips", sets.List(result.NodeNames))
	}
	return sets.List(result.NodeNames)
}

// TestPreFilterNamesTheNodesWithRoom: when at most a third of the nodes
// have room for a pod's GPUs, PreFilter names them: free GPUs enough, or
// GPUs held by pods of lower priority (which preemption may evict); never a
// node without GPUs. Otherwise, or when none has room, it names none
// (every node).
func TestPreFilterNamesTheNodesWithRoom(t *testing.T) {
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 8 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "leaf-a"))
		running = append(running, withPriority(pod("serve-"+name, name, "production", "8"), 10000))
	}
	nodes = append(nodes, node("n08", "leaf-b"), node("n09", "leaf-b"), node("n10", "leaf-b"),
		st.MakeNode().Name("n11").Label("leaf", "leaf-b").Capacity(map[v1.ResourceName]string{"cpu": "64", "pods": "110"}).Obj())
	running = append(running,
		withPriority(pod("train-n08", "n08", "research", "8"), 100),
		withPriority(pod("serve-n09", "n09", "production", "4"), 10000))
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		incoming *v1.Pod
		want     []string
	}{
		{"8 GPUs: the free node and the one research holds", withPriority(pod("x", "", "production", "8"), 10000), []string{"n08", "n10"}},
		{"4 GPUs: and the half-free node", withPriority(pod("x", "", "production", "4"), 10000), []string{"n08", "n09", "n10"}},
		{"lowest priority: no preemption, free GPUs only", withPriority(pod("x", "", "production", "1"), 0), []string{"n09", "n10"}},
		{"no GPUs: every node", withPriority(st.MakePod().Name("x").Namespace("ns").Obj(), 10000), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := preFilterNames(t, pl, tc.incoming, infos); !slices.Equal(got, tc.want) {
				t.Errorf("PreFilter named %v, want %v", got, tc.want)
			}
		})
	}

	// More than a third with room (5 of 12): every node.
	freed := slices.DeleteFunc(slices.Clone(running), func(p *v1.Pod) bool { return p.Name == "serve-n00" || p.Name == "serve-n01" })
	pl, snapshot = newPlugin(t, nodes, freed)
	if infos, err = snapshot.NodeInfos().List(); err != nil {
		t.Fatal(err)
	}
	if got := preFilterNames(t, pl, withPriority(pod("x", "", "production", "4"), 10000), infos); got != nil {
		t.Errorf("5 of 12 nodes have room: PreFilter named %v, want every node", got)
	}
	// None with room: every node, so that the scheduler says why.
	pl, snapshot = newPlugin(t, nodes[:8], running[:8])
	if infos, err = snapshot.NodeInfos().List(); err != nil {
		t.Fatal(err)
	}
	if got := preFilterNames(t, pl, withPriority(pod("x", "", "production", "8"), 10000), infos); got != nil {
		t.Errorf("no node has room: PreFilter named %v, want every node", got)
	}
}

// TestPreFilterSeesChangesNotHinted: a node freed by something this
// profile did not do (a pod deleted) is named in the very next cycle, not
// a rescan later: PreFilter reads every node's generation.
func TestPreFilterSeesChangesNotHinted(t *testing.T) {
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 9 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "leaf-a"))
		if i > 0 {
			running = append(running, withPriority(pod("serve-"+name, name, "production", "8"), 10000))
		}
	}
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	incoming := withPriority(pod("x", "", "production", "8"), 10000)
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00"}; !slices.Equal(got, want) {
		t.Fatalf("PreFilter named %v, want %v", got, want)
	}
	// n05's pod goes; the plugin's clock does not move, so no periodic
	// rescan covers it.
	for _, ni := range infos {
		if ni.Node().Name == "n05" {
			if err := ni.(*framework.NodeInfo).RemovePod(klogDiscard(), running[4]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00", "n05"}; !slices.Equal(got, want) {
		t.Errorf("after n05's pod was deleted, PreFilter named %v, want %v", got, want)
	}
}

// TestPreFilterNeverLeavesOutANodeThatFits checks, on random clusters
// against upstream's NodeResourcesFit, that every node PreFilter leaves
// out is one NodeResourcesFit rejects, and would still reject after
// preemption evicted every pod of lower priority than the incoming one:
// leaving it out changes neither where the pod may go nor whom
// preemption may evict.
func TestPreFilterNeverLeavesOutANodeThatFits(t *testing.T) {
	ctx := context.Background()
	fitArgs := &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
		Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}}}}
	fit, err := noderesources.NewFit(ctx, fitArgs, handle{}, feature.Features{})
	if err != nil {
		t.Fatal(err)
	}
	fits := func(incoming *v1.Pod, ni fwk.NodeInfo) bool {
		state := framework.NewCycleState()
		if _, s := fit.(fwk.PreFilterPlugin).PreFilter(ctx, state, incoming, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		return fit.(fwk.FilterPlugin).Filter(ctx, state, incoming, ni).IsSuccess()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	priorities := []int32{100, 10000, 30000, 30000}
	narrowed, leftOut := 0, 0
	for round := range 200 {
		var nodes []*v1.Node
		var running []*v1.Pod
		for i := range 30 {
			name := fmt.Sprintf("n%02d", i)
			gpus := []string{"8", "8", "8", "4", ""}[rng.IntN(5)]
			capacity := map[v1.ResourceName]string{"cpu": "16", "memory": "64Gi", "pods": "110"}
			if gpus != "" {
				capacity["nvidia.com/gpu"] = gpus
			}
			nodes = append(nodes, st.MakeNode().Name(name).Label("leaf", fmt.Sprintf("leaf-%d", i/8)).Capacity(capacity).Obj())
			// Mostly full, so that few nodes have room.
			for j := range 2 + rng.IntN(3) {
				p := st.MakePod().Name(fmt.Sprintf("p-%s-%d", name, j)).Namespace("ns").UID(fmt.Sprintf("p-%s-%d", name, j)).Node(name).
					Req(map[v1.ResourceName]string{"cpu": fmt.Sprint(1 + rng.IntN(6)), "nvidia.com/gpu": fmt.Sprint([]int{1, 2, 4, 8, 8}[rng.IntN(5)])}).Obj()
				p.Spec.PriorityClassName = []string{"research", "production"}[rng.IntN(2)]
				running = append(running, withPriority(p, priorities[rng.IntN(len(priorities))]))
			}
		}
		pl, snapshot := newPlugin(t, nodes, running)
		infos, err := snapshot.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		incoming := withPriority(st.MakePod().Name("x").Namespace("ns").UID("x").
			Req(map[v1.ResourceName]string{"cpu": "1", "nvidia.com/gpu": fmt.Sprint([]int{1, 2, 4, 8}[rng.IntN(4)])}).Obj(), []int32{50, 5000, 20000}[rng.IntN(3)])
		names := preFilterNames(t, pl, incoming, infos)
		if names == nil {
			continue
		}
		narrowed++
		named := sets.New(names...)
		for _, ni := range infos {
			n := ni.Node()
			if named.Has(n.Name) {
				continue
			}
			leftOut++
			if fits(incoming, ni) {
				t.Fatalf("round %d: PreFilter left out %s, where NodeResourcesFit fits the %s-GPU pod", round, n.Name, incoming.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", "").String())
			}
			// What preemption would leave: the pods of the same or a
			// higher priority.
			after := framework.NewNodeInfo()
			after.SetNode(n)
			for _, p := range ni.GetPods() {
				if *p.GetPod().Spec.Priority >= *incoming.Spec.Priority {
					after.AddPod(p.GetPod())
				}
			}
			if fits(incoming, after) {
				t.Fatalf("round %d: PreFilter left out %s, where the pod fits once pods of lower priority are evicted", round, n.Name)
			}
		}
	}
	// The check above must have had something to check.
	if narrowed < 20 || leftOut < 200 {
		t.Fatalf("PreFilter named nodes in %d of 200 rounds, leaving out %d nodes: too few to check", narrowed, leftOut)
	}
	t.Logf("PreFilter named nodes in %d of 200 rounds, leaving out %d nodes", narrowed, leftOut)
}
