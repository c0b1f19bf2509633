// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// TestCapacitySampler: GPUs by nodes and class from the pods bound and
// running, free GPUs per fabric domain on physical nodes only, the largest
// free domain per level; unbound and finished pods count for nothing.
// Domains without GPUs (CPU nodes, labelled or not: an unlabelled node is
// a domain of its own at every level) have no series, so a cluster's CPU
// nodes do not add series per node to every scrape.
func TestCapacitySampler(t *testing.T) {
	node := func(name, leaf string, gpus int, labels map[string]string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"leaf": leaf, "spine": "s1"}},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(gpus))}}}
		for k, v := range labels {
			n.Labels[k] = v
		}
		if leaf == "" {
			n.Labels = labels
		}
		return n
	}
	pod := func(name, node, class string, gpus int, phase v1.PodPhase) *v1.Pod {
		q := resource.MustParse(fmt.Sprint(gpus))
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1.PodSpec{NodeName: node, PriorityClassName: class, Containers: []v1.Container{{Name: "c",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}}}}},
			Status: v1.PodStatus{Phase: phase}}
	}
	nodes := []*v1.Node{node("n1", "l1", 8, nil), node("n2", "l1", 8, nil), node("n3", "l2", 8, nil),
		node("vk", "", 64, map[string]string{"type": "virtual-kubelet"}),
		node("cpu1", "", 0, nil), node("cpu2", "", 0, nil), node("c3", "l3", 0, nil)}
	pods := []*v1.Pod{
		pod("train", "n1", "research", 8, v1.PodRunning),
		pod("serve", "n2", "production", 2, v1.PodRunning),
		pod("batch", "n3", "", 1, v1.PodRunning),
		pod("done", "n3", "research", 4, v1.PodSucceeded),
		pod("pending", "", "research", 8, v1.PodPending),
		pod("moved", "vk", "production", 4, v1.PodRunning),
	}
	nodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	nodeInformer := factory.Core().V1().Nodes().Informer()
	for _, n := range nodes {
		for _, idx := range []cache.Indexer{nodeIndex, nodeInformer.GetIndexer()} {
			if err := idx.Add(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range pods {
		if err := podIndex.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	source, err := fabric.NewLabelSource([]string{"leaf", "spine"}, []string{"leaf", "spine"})
	if err != nil {
		t.Fatal(err)
	}
	tracker, err := fabric.NewTracker(source, nodeInformer)
	if err != nil {
		t.Fatal(err)
	}
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "sluice.dev/overflow")
	if err != nil {
		t.Fatal(err)
	}
	sample := capacitySampler(corelisters.NewNodeLister(nodeIndex), corelisters.NewPodLister(podIndex), classes, tracker, "nvidia.com/gpu")
	got := map[string]float64{}
	sample(func(g *metrics.Gauge, value float64, labels ...string) {
		got[fmt.Sprint(g == metrics.CapacityGPUs, g == metrics.FabricFreeGPUs, g == metrics.FabricLargestFreeGPUs, labels)] = value
	})
	capacity := func(labels ...string) string { return fmt.Sprint(true, false, false, labels) }
	free := func(labels ...string) string { return fmt.Sprint(false, true, false, labels) }
	largest := func(labels ...string) string { return fmt.Sprint(false, false, true, labels) }
	want := map[string]float64{
		capacity("physical", "research"): 8, capacity("physical", "production"): 2, capacity("physical", "other"): 1, capacity("physical", "free"): 13,
		capacity("overflow", "research"): 0, capacity("overflow", "production"): 4, capacity("overflow", "other"): 0, capacity("overflow", "free"): 60,
		free("leaf", "leaf/l1"): 6, free("leaf", "leaf/l2"): 7, largest("leaf"): 7,
		free("spine", "spine/s1"): 13, largest("spine"): 13,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sampled gauges (-want,+got):\n%s", diff)
	}
}
