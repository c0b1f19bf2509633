// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
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
		name:    "production runs on a node the pod cannot go to",
		nodes:   []*v1.Node{cpuNode("a1", "a"), cpuNode("b1", "b"), cpuNode("b2", "b")},
		running: []*v1.Pod{cpuPod("serve", "a1", "production")},
		pod:     cpuPod("p", "", ""), only: []string{"b1", "b2"}, skip: true,
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
			scores := map[int64]bool{}
			for _, ni := range candidates {
				score, s := pl.Score(ctx, state, tc.pod, ni)
				if !s.IsSuccess() {
					t.Fatal(s)
				}
				scores[score] = true
			}
			if len(scores) < 2 && tc.pod.Spec.PriorityClassName == "" && tc.pod.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", "").IsZero() {
				t.Errorf("scored although every candidate scores the same: %v", scores)
			}
		})
	}
}
