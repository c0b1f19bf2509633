// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/sluice-sched/sluice/pkg/capacity"
)

// gpuNode is node with gpus GPUs.
func gpuNode(name, leaf, gpus string) *v1.Node {
	n := node(name, leaf)
	q := resource.MustParse(gpus)
	n.Status.Capacity["nvidia.com/gpu"], n.Status.Allocatable["nvidia.com/gpu"] = q, q
	return n
}

// TestPreScoreSkipsWhenEveryNodeScoresTheSame: a pod that is not
// production, on candidates that would all score the same (no production,
// no overflow node, and the same GPU term: no GPUs in use among them for
// a pod that asks for none, every candidate filled by a pod that asks for
// GPUs), is not scored: a score equal on every node orders nothing, and
// the framework's per-node pass for one more plugin cost a SchedulingBasic
// cycle about a sixth of its Score time. Whenever the score would tell
// the candidates apart, the plugin scores.
func TestPreScoreSkipsWhenEveryNodeScoresTheSame(t *testing.T) {
	cpuNode := func(name, leaf string) *v1.Node {
		return st.MakeNode().Name(name).Label("leaf", leaf).Capacity(map[v1.ResourceName]string{"cpu": "4", "memory": "32Gi", "pods": "110"}).Obj()
	}
	vk := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{"pods": "5000", "nvidia.com/gpu": "64"}).Obj()
	cpuPod := func(name, node, class string) *v1.Pod {
		p := st.MakePod().Name(name).Namespace("ns").UID(name).Node(node).Req(map[v1.ResourceName]string{"cpu": "100m"}).Obj()
		p.Spec.PriorityClassName = class
		return p
	}
	cases := []struct {
		name    string
		nodes   []*v1.Node
		running []*v1.Pod
		pod     *v1.Pod
		// only: the candidates PreScore is given, all nodes when empty.
		only []string
		// late: a node the snapshot has and the fabric tree not yet.
		late *v1.Node
		skip bool
	}{{
		name:  "CPU pod, CPU nodes, nothing running",
		nodes: []*v1.Node{cpuNode("a1", "a"), cpuNode("a2", "a"), cpuNode("b1", "b")},
		pod:   cpuPod("p", "", ""), skip: true,
	}, {
		name:    "CPU pod, idle GPU nodes, other pods running",
		nodes:   []*v1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")},
		running: []*v1.Pod{cpuPod("web", "a1", ""), pod("train", "b1", "research", "0")},
		pod:     cpuPod("p", "", ""), skip: true,
	}, {
		name:    "production on every node",
		nodes:   []*v1.Node{cpuNode("a1", "a"), cpuNode("b1", "b")},
		running: []*v1.Pod{cpuPod("serve-a", "a1", "production"), cpuPod("serve-b", "b1", "production")},
		pod:     cpuPod("p", "", ""), skip: true,
	}, {
		// The plugin does not look for candidates that happen to score
		// the same in a cluster where nodes differ: it scores.
		name:    "production runs on a node the pod cannot go to",
		nodes:   []*v1.Node{cpuNode("a1", "a"), cpuNode("b1", "b"), cpuNode("b2", "b")},
		running: []*v1.Pod{cpuPod("serve", "a1", "production")},
		pod:     cpuPod("p", "", ""), only: []string{"b1", "b2"},
	}, {
		name:    "production runs on a candidate",
		nodes:   []*v1.Node{cpuNode("a1", "a"), cpuNode("a2", "a"), cpuNode("b1", "b")},
		running: []*v1.Pod{cpuPod("serve", "a1", "production")},
		pod:     cpuPod("p", "", ""),
	}, {
		name:    "production runs in a candidate's leaf",
		nodes:   []*v1.Node{cpuNode("a1", "a"), cpuNode("a2", "a"), cpuNode("b1", "b")},
		running: []*v1.Pod{cpuPod("serve", "a1", "production")},
		pod:     cpuPod("p", "", ""), only: []string{"a2", "b1"},
	}, {
		name:    "GPUs in use on a candidate",
		nodes:   []*v1.Node{node("a1", "a"), node("a2", "a")},
		running: []*v1.Pod{pod("train", "a1", "research", "2")},
		pod:     cpuPod("p", "", ""),
	}, {
		name:  "an overflow node among the candidates",
		nodes: []*v1.Node{cpuNode("a1", "a"), vk},
		pod:   cpuPod("p", "", ""),
	}, {
		name:  "an overflow node the fabric tree does not have yet",
		nodes: []*v1.Node{cpuNode("a1", "a"), cpuNode("a2", "a")},
		late:  vk,
		pod:   cpuPod("p", "", ""),
	}, {
		// Whole-node pods: every candidate is full after the pod, so the
		// node chosen can take no pod of its shape again.
		name:  "an 8-GPU pod, idle 8-GPU nodes",
		nodes: []*v1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")},
		pod:   pod("p", "", "", "8"), skip: true,
	}, {
		name:    "a 4-GPU pod, 4 GPUs free on every candidate",
		nodes:   []*v1.Node{node("a1", "a"), node("a2", "a")},
		running: []*v1.Pod{pod("train-1", "a1", "research", "4"), pod("train-2", "a2", "", "4")},
		pod:     pod("p", "", "", "4"), skip: true,
	}, {
		name:    "a 4-GPU pod, one candidate with 8 GPUs free",
		nodes:   []*v1.Node{node("a1", "a"), node("a2", "a")},
		running: []*v1.Pod{pod("train", "a1", "research", "4")},
		pod:     pod("p", "", "", "4"),
	}, {
		name:  "an 8-GPU pod, candidates of 8 and 16 GPUs",
		nodes: []*v1.Node{node("a1", "a"), gpuNode("a2", "a", "16")},
		pod:   pod("p", "", "", "8"),
	}, {
		// Every candidate's term is the same before the pod, but the node
		// chosen packs more after it: a pod alike placed from this cycle's
		// ranking would score that node and not the others.
		name:  "a 1-GPU pod, idle GPU nodes",
		nodes: []*v1.Node{node("a1", "a"), node("a2", "a")},
		pod:   pod("p", "", "", "1"),
	}, {
		name:    "an 8-GPU pod, production in a candidate's leaf",
		nodes:   []*v1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")},
		running: []*v1.Pod{cpuPod("serve", "a1", "production")},
		pod:     pod("p", "", "", "8"), only: []string{"a2", "b1"},
	}, {
		// Its own placements change what production scores.
		name:  "a production pod",
		nodes: []*v1.Node{cpuNode("a1", "a"), cpuNode("a2", "a")},
		pod:   cpuPod("p", "", "production"),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl, snapshot := newPlugin(t, tc.nodes, tc.running)
			if tc.late != nil {
				snapshot = cache.NewSnapshot(tc.running, append(tc.nodes, tc.late))
				pl.handle = newHandle(snapshot)
			}
			all, err := snapshot.NodeInfos().List()
			if err != nil {
				t.Fatal(err)
			}
			candidates := all
			if tc.only != nil {
				candidates = nil
				for _, ni := range all {
					for _, name := range tc.only {
						if ni.Node().Name == name {
							candidates = append(candidates, ni)
						}
					}
				}
			}
			ctx := context.Background()
			state := framework.NewCycleState()
			s := pl.PreScore(ctx, state, tc.pod, candidates)
			if got := s.Code() == fwk.Skip; got != tc.skip {
				t.Fatalf("PreScore returned %v, want skipped %v", s, tc.skip)
			}
			if tc.skip {
				return
			}
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			for _, ni := range candidates {
				if _, s := pl.Score(ctx, state, tc.pod, ni); !s.IsSuccess() {
					t.Fatal(s)
				}
			}
		})
	}
}

// TestPreScoreSkipsOnlyWhenScoresAreEqual: on random clusters (production,
// research GPUs, nodes of 8 and 16 GPUs, an overflow node, random
// candidates), whenever PreScore skips a pod that is not production, Score
// would have given every candidate the same score, and a pod that asks
// for GPUs leaves no GPU free on any of them.
func TestPreScoreSkipsOnlyWhenScoresAreEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	skipped := map[string]int{}
	for round := range 800 {
		gpus := []string{"0", "1", "4", "8"}[rng.IntN(4)]
		incoming := pod("p", "", "", gpus)
		var nodes []*v1.Node
		var running []*v1.Pod
		for i := range 2 + rng.IntN(8) {
			name := fmt.Sprintf("n%d", i)
			if rng.IntN(6) == 0 {
				nodes = append(nodes, gpuNode(name, fmt.Sprintf("leaf-%d", i/3), "16"))
			} else {
				nodes = append(nodes, node(name, fmt.Sprintf("leaf-%d", i/3)))
			}
			switch rng.IntN(12) {
			case 0:
				running = append(running, pod("serve-"+name, name, "production", "1"))
			case 1:
				running = append(running, pod("train-"+name, name, "research", "8"))
			case 2, 3:
				running = append(running, pod("train-"+name, name, "research", "4"))
			}
		}
		if rng.IntN(10) == 0 {
			nodes = append(nodes, st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{"pods": "5000", "nvidia.com/gpu": "64"}).Obj())
		}
		pl, snapshot := newPlugin(t, nodes, running)
		all, err := snapshot.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		// Candidates are nodes the pod fits, as after Filter.
		want := capacity.ShapeOf(incoming).Scalar["nvidia.com/gpu"]
		var candidates []fwk.NodeInfo
		for _, ni := range all {
			free := ni.GetAllocatable().GetScalarResources()["nvidia.com/gpu"] - ni.GetRequested().GetScalarResources()["nvidia.com/gpu"]
			if rng.IntN(3) > 0 && free >= want {
				candidates = append(candidates, ni)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		ctx := context.Background()
		s := pl.PreScore(ctx, framework.NewCycleState(), incoming, candidates)
		if s.Code() != fwk.Skip {
			continue
		}
		skipped[gpus]++
		// What Score would have given each candidate.
		state := &preScoreState{packingView: pl.view, gpus: want}
		scores := map[string]int64{}
		for _, ni := range candidates {
			scores[ni.Node().Name] = pl.scoreOf(state, ni)
			free := ni.GetAllocatable().GetScalarResources()["nvidia.com/gpu"] - ni.GetRequested().GetScalarResources()["nvidia.com/gpu"]
			if want > 0 && free != want {
				t.Fatalf("round %d: a %d-GPU pod skipped although %s would have %d GPUs free after it", round, want, ni.Node().Name, free-want)
			}
		}
		for _, v := range scores {
			if v != scores[candidates[0].Node().Name] {
				t.Fatalf("round %d: a %d-GPU pod skipped although the candidates score %v", round, want, scores)
			}
		}
	}
	for _, gpus := range []string{"0", "4", "8"} {
		if skipped[gpus] == 0 {
			t.Fatalf("no round skipped a %s-GPU pod (skips %v): the test checks nothing there", gpus, skipped)
		}
	}
}
