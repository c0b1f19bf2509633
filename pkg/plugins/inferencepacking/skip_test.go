// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestPreScoreSkipsWhenEveryNodeScoresTheSame: a pod that is not
// production and asks for no GPUs, on candidates that would all score the
// same (no production, no overflow node, no GPUs in use among them), is
// not scored: a score equal on every node orders nothing, and the
// framework's per-node pass for one more plugin cost a SchedulingBasic
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
		name:  "a pod that asks for GPUs",
		nodes: []*v1.Node{node("a1", "a"), node("a2", "a")},
		pod:   pod("p", "", "", "1"),
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
// research GPUs, an overflow node, random candidates), whenever PreScore
// skips a pod that is neither production nor asks for GPUs, Score would
// have given every candidate the same score.
func TestPreScoreSkipsOnlyWhenScoresAreEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 16))
	incoming := st.MakePod().Name("p").Namespace("ns").UID("p").Req(map[v1.ResourceName]string{"cpu": "100m"}).Obj()
	skipped := 0
	for round := range 400 {
		var nodes []*v1.Node
		var running []*v1.Pod
		for i := range 2 + rng.IntN(8) {
			name := fmt.Sprintf("n%d", i)
			nodes = append(nodes, node(name, fmt.Sprintf("leaf-%d", i/3)))
			switch rng.IntN(12) {
			case 0:
				running = append(running, pod("serve-"+name, name, "production", "1"))
			case 1:
				running = append(running, pod("train-"+name, name, "research", "8"))
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
		var candidates []fwk.NodeInfo
		for _, ni := range all {
			if rng.IntN(3) > 0 {
				candidates = append(candidates, ni)
			}
		}
		ctx := context.Background()
		s := pl.PreScore(ctx, framework.NewCycleState(), incoming, candidates)
		if s.Code() != fwk.Skip {
			continue
		}
		skipped++
		// What Score would have given each candidate.
		state := &preScoreState{packingView: pl.view}
		scores := map[string]int64{}
		for _, ni := range candidates {
			scores[ni.Node().Name] = pl.scoreOf(state, ni)
		}
		for _, v := range scores {
			if v != scores[candidates[0].Node().Name] {
				t.Fatalf("round %d: skipped although the candidates score %v", round, scores)
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no round skipped: the test checks nothing")
	}
}
