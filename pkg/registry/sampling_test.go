// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/capacity"
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
	gpusBy := func(labels ...string) string { return fmt.Sprint(true, false, false, labels) }
	free := func(labels ...string) string { return fmt.Sprint(false, true, false, labels) }
	largest := func(labels ...string) string { return fmt.Sprint(false, false, true, labels) }
	want := map[string]float64{
		gpusBy("physical", "research"): 8, gpusBy("physical", "production"): 2, gpusBy("physical", "other"): 1, gpusBy("physical", "free"): 13,
		gpusBy("overflow", "research"): 0, gpusBy("overflow", "production"): 4, gpusBy("overflow", "other"): 0, gpusBy("overflow", "free"): 60,
		free("leaf", "leaf/l1"): 6, free("leaf", "leaf/l2"): 7, largest("leaf"): 7,
		free("spine", "spine/s1"): 13, largest("spine"): 13,
	}
	sample := newSampler(t, nodes, pods)
	if diff := cmp.Diff(want, sampled(sample)); diff != "" {
		t.Errorf("sampled gauges (-want,+got):\n%s", diff)
	}
}

// TestCapacitySamplerCPUNodes: a scrape reads only the nodes that offer
// GPUs and the pods that ask for them. With 5,000 CPU nodes and 10,000
// CPU pods beside the GPU nodes it reports the same and allocates no more
// than without them (the sampler runs on every scrape: listing and
// mapping every node and pod cost a SchedulingBasic run at 5,000 nodes
// 1-2 s of CPU).
func TestCapacitySamplerCPUNodes(t *testing.T) {
	gpuNodes := []*v1.Node{gpuNode("n1", "l1", 8), gpuNode("n2", "l2", 8)}
	gpuPods := []*v1.Pod{gpuPod("serve", "n1", "production", 2)}
	nodes, pods := slices.Clone(gpuNodes), slices.Clone(gpuPods)
	for i := range 5000 {
		n := fmt.Sprintf("cpu%d", i)
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("32")}}})
		for j := range 2 {
			pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", n, j)},
				Spec: v1.PodSpec{NodeName: n, PriorityClassName: "production", Containers: []v1.Container{{Name: "c",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
				Status: v1.PodStatus{Phase: v1.PodRunning}})
		}
	}
	small, large := newSampler(t, gpuNodes, gpuPods), newSampler(t, nodes, pods)
	if diff := cmp.Diff(sampled(small), sampled(large)); diff != "" {
		t.Errorf("gauges with CPU nodes differ from without (-without,+with):\n%s", diff)
	}
	a, b := allocated(small), allocated(large)
	t.Logf("a scrape allocated %d bytes with 5,000 CPU nodes and 10,000 CPU pods, %d without", b, a)
	if b > a+4096 {
		t.Errorf("a scrape allocated %d bytes with 5,000 CPU nodes and 10,000 CPU pods, %d without: it reads them", b, a)
	}
}

// allocated is the bytes one call of sample allocates (the least of five
// calls, so that another goroutine's allocation does not count).
func allocated(sample metrics.Sampler) uint64 {
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range 5 {
		runtime.ReadMemStats(&before)
		sample(func(*metrics.Gauge, float64, ...string) {})
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// sampled is what one call of sample emits, by gauge and labels.
func sampled(sample metrics.Sampler) map[string]float64 {
	got := map[string]float64{}
	sample(func(g *metrics.Gauge, value float64, labels ...string) {
		got[fmt.Sprint(g == metrics.CapacityGPUs, g == metrics.FabricFreeGPUs, g == metrics.FabricLargestFreeGPUs, labels)] = value
	})
	return got
}

func gpuNode(name, leaf string, gpus int) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"leaf": leaf, "spine": "s1"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(gpus))}}}
}

func gpuPod(name, node, class string, gpus int) *v1.Pod {
	q := resource.MustParse(fmt.Sprint(gpus))
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.PodSpec{NodeName: node, PriorityClassName: class, Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
}

// newSampler is the capacity sampler over nodes and pods, with the fabric
// of the labels leaf and spine.
func newSampler(t *testing.T, nodes []*v1.Node, pods []*v1.Pod) metrics.Sampler {
	t.Helper()
	nodeIndexers, podIndexers := capacity.GPUIndexers("nvidia.com/gpu")
	nodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nodeIndexers)
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, podIndexers)
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
	return capacitySampler(capacity.IndexedGPUs(nodeIndex, podIndex), classes, tracker, "nvidia.com/gpu")
}
