// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const testGPU = v1.ResourceName("nvidia.com/gpu")

// TestGPUsByNode: GPUs are counted wherever a pod's spec can request them
// (containers, init containers, overhead), by class, on the nodes listed;
// pending, finished and unlisted-node pods are left out.
func TestGPUsByNode(t *testing.T) {
	gpus := func(n string) v1.ResourceList { return v1.ResourceList{testGPU: resource.MustParse(n)} }
	pod := func(name, node string) *st.PodWrapper { return st.MakePod().Name(name).UID(name).Node(node) }
	withInit := pod("init", "a").Obj()
	withInit.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Requests: gpus("4")}}}
	overhead := pod("overhead", "b").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	overhead.Spec.Overhead = gpus("1")
	finished := pod("done", "a").Req(map[v1.ResourceName]string{testGPU: "8"}).Phase(v1.PodSucceeded).Obj()
	pods := []*v1.Pod{
		pod("prod", "a").Req(map[v1.ResourceName]string{testGPU: "2", "cpu": "1"}).Labels(map[string]string{"class": "production"}).Obj(),
		pod("cpu", "a").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj(),
		withInit, overhead, finished,
		pod("elsewhere", "z").Req(map[v1.ResourceName]string{testGPU: "1"}).Obj(),
		st.MakePod().Name("pending").Req(map[v1.ResourceName]string{testGPU: "1"}).Obj(),
	}
	nodes := []*v1.Node{
		st.MakeNode().Name("a").Capacity(map[v1.ResourceName]string{testGPU: "8"}).Obj(),
		st.MakeNode().Name("b").Capacity(map[v1.ResourceName]string{testGPU: "8"}).Obj(),
		st.MakeNode().Name("c").Capacity(map[v1.ResourceName]string{"cpu": "8"}).Obj(),
	}
	class := func(p *v1.Pod) string {
		if c := p.Labels["class"]; c != "" {
			return c
		}
		return "other"
	}
	got := GPUsByNode(nodes, pods, testGPU, class)
	want := map[string]*NodeGPUs{
		"a": {Allocatable: 8, Requested: map[string]int64{"production": 2, "other": 4}},
		"b": {Allocatable: 8, Requested: map[string]int64{"other": 1}},
		"c": {},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("GPUsByNode (-want +got):\n%s", diff)
	}
	if free := got["a"].Free(); free != 2 {
		t.Errorf("node a: %d GPUs free, want 2", free)
	}
	always := v1.ContainerRestartPolicyAlways
	sidecar := pod("sidecar", "a").Req(map[v1.ResourceName]string{testGPU: "1"}).Obj()
	sidecar.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: gpus("2")}}}
	for _, p := range append(pods, sidecar) {
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[testGPU]
		if got := PodRequest(p, testGPU); got != q.Value() {
			t.Errorf("pod %s: podRequest %d, PodRequests %d", p.Name, got, q.Value())
		}
	}
}

// BenchmarkGPUsByNode: one /metrics scrape's pass over the bench's
// SchedulingBasic cluster (5,000 nodes, 11,000 CPU pods) and its GPU pods
// case (5,000 GPU pods).
func BenchmarkGPUsByNode(b *testing.B) {
	nodes := make([]*v1.Node, 5000)
	for i := range nodes {
		nodes[i] = st.MakeNode().Name(fmt.Sprintf("n%d", i)).Capacity(map[v1.ResourceName]string{testGPU: "8", "cpu": "32"}).Obj()
	}
	class := func(*v1.Pod) string { return "production" }
	for _, c := range []struct {
		name string
		n    int
		req  map[v1.ResourceName]string
	}{
		{"cpu pods", 11000, map[v1.ResourceName]string{"cpu": "100m"}},
		{"gpu pods", 5000, map[v1.ResourceName]string{"cpu": "1", testGPU: "2"}},
	} {
		pods := make([]*v1.Pod, c.n)
		for i := range pods {
			pods[i] = st.MakePod().Name(fmt.Sprintf("p%d", i)).Node(fmt.Sprintf("n%d", i%len(nodes))).Req(c.req).Obj()
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				GPUsByNode(nodes, pods, testGPU, class)
			}
		})
	}
}
