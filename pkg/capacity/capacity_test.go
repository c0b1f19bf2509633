// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestSlots: how many more pods of a shape fit on a node, the number the
// fabric search sums per domain.
func TestSlots(t *testing.T) {
	node := func() *st.NodeWrapper {
		return st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"})
	}
	gpuPod := func(gpus, cpu string) *v1.Pod {
		return st.MakePod().Name("p").UID("p").Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus, "cpu": cpu}).Obj()
	}
	running := st.MakePod().Name("r").UID("r").Node("n").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "3", "cpu": "4"}).Obj()
	tests := []struct {
		name    string
		node    *v1.Node
		pod     *v1.Pod
		running []*v1.Pod
		held    map[v1.ResourceName]int64
		want    int
	}{
		{"8 GPUs, 2-GPU pods: 4", node().Obj(), gpuPod("2", "1"), nil, nil, 4},
		{"3 GPUs taken: 5 free, 2-GPU pods: 2", node().Obj(), gpuPod("2", "1"), []*v1.Pod{running}, nil, 2},
		{"Slurm holds 4 of the 5 free: 1-GPU pods: 1", node().Obj(), gpuPod("1", "1"), []*v1.Pod{running}, map[v1.ResourceName]int64{"nvidia.com/gpu": 4}, 1},
		{"CPU binds before GPUs: 28 CPUs left, 10-CPU pods: 2", node().Obj(), gpuPod("1", "10"), []*v1.Pod{running}, nil, 2},
		{"untolerated NoSchedule taint: 0", node().Taints([]v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}).Obj(), gpuPod("1", "1"), nil, nil, 0},
		{"unschedulable node: 0", node().Unschedulable(true).Obj(), gpuPod("1", "1"), nil, nil, 0},
		{"pod without GPUs counts CPU and pods", node().Obj(), st.MakePod().Name("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(), nil, nil, 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := framework.NewNodeInfo(tt.running...)
			ni.SetNode(tt.node)
			if got := ShapeOf(tt.pod).Slots(ni, tt.held); got != tt.want {
				t.Errorf("Slots = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLargest(t *testing.T) {
	small := st.MakePod().Name("s").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "1", "cpu": "8"}).Obj()
	big := st.MakePod().Name("b").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8", "cpu": "1"}).Obj()
	tie := st.MakePod().Name("t").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8", "cpu": "4"}).Obj()
	if got := Largest([]*v1.Pod{small, big, tie}, "nvidia.com/gpu"); got.Name != "t" {
		t.Errorf("Largest = %s, want t (most GPUs, then most CPU)", got.Name)
	}
}
