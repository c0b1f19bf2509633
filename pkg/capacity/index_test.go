// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestGPUIndex: the index lists the nodes that offer GPUs, the nodes
// without GPUs where a pod that asks for them is bound (an overflow node
// may offer none), and the bound pods that ask for GPUs; it follows a pod
// as it is bound and a node as its GPUs change, and a second index of the
// same informers reuses the first's.
func TestGPUIndex(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	nodeInformer, podInformer := factory.Core().V1().Nodes().Informer(), factory.Core().V1().Pods().Informer()
	x, err := NewGPUIndex(nodeInformer, podInformer, testGPU)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewGPUIndex(nodeInformer, podInformer, testGPU); err != nil {
		t.Fatalf("indexing the same informers again: %v", err)
	}
	add := func(obj any) {
		t.Helper()
		var err error
		switch o := obj.(type) {
		case *v1.Node:
			err = nodeInformer.GetIndexer().Update(o)
		case *v1.Pod:
			err = podInformer.GetIndexer().Update(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	gpuReq := map[v1.ResourceName]string{testGPU: "1"}
	add(st.MakeNode().Name("gpu").Capacity(map[v1.ResourceName]string{testGPU: "8"}).Obj())
	add(st.MakeNode().Name("cpu").Capacity(map[v1.ResourceName]string{"cpu": "8"}).Obj())
	add(st.MakeNode().Name("vk").Capacity(map[v1.ResourceName]string{"cpu": "8"}).Obj())
	add(st.MakePod().Name("on-vk").Node("vk").Req(gpuReq).Obj())
	add(st.MakePod().Name("cpu-pod").Node("cpu").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj())
	pending := st.MakePod().Name("pending").Req(gpuReq).Obj()
	add(pending)
	add(st.MakePod().Name("nowhere").Node("gone").Req(gpuReq).Obj())
	check := func(wantNodes, wantPods []string) {
		t.Helper()
		nodes, pods, err := x.List()
		if err != nil {
			t.Fatal(err)
		}
		var gotNodes, gotPods []string
		for _, n := range nodes {
			gotNodes = append(gotNodes, n.Name)
		}
		for _, p := range pods {
			gotPods = append(gotPods, p.Name)
		}
		slices.Sort(gotNodes)
		slices.Sort(gotPods)
		if diff := cmp.Diff(wantNodes, gotNodes); diff != "" {
			t.Errorf("nodes (-want,+got):\n%s", diff)
		}
		if diff := cmp.Diff(wantPods, gotPods); diff != "" {
			t.Errorf("pods (-want,+got):\n%s", diff)
		}
	}
	check([]string{"gpu", "vk"}, []string{"nowhere", "on-vk"})
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "cpu"
	add(bound)
	add(st.MakeNode().Name("gpu").Capacity(map[v1.ResourceName]string{testGPU: "0"}).Obj())
	check([]string{"cpu", "vk"}, []string{"nowhere", "on-vk", "pending"})
}
