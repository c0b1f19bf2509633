// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package bench

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/sluice-sched/sluice/internal/benchfmt"
)

// placementCase is the case whose gangs' placement the bench records.
const placementCase = "/FabricGangs."

// The labels pod-fabric-gang.yaml puts on each gang member, and the node
// labels of node-gpu.yaml's fabric.
const (
	gangLabel     = "bench.sluice.dev/gang"
	gangSizeLabel = "bench.sluice.dev/gang-size"
	leafLabel     = "network.topology.nvidia.com/leaf"
	spineLabel    = "network.topology.nvidia.com/spine"
	gpuResource   = v1.ResourceName("nvidia.com/gpu")
)

// placementRecorder watches nodes and pods of one workload, keeping each
// node's free GPUs and each gang's nodes as its members are bound.
type placementRecorder struct {
	mu     sync.Mutex
	leaf   map[string]string
	spine  map[string]string
	free   map[string]int64 // GPUs by node: allocatable less bound pods' requests
	nodeOK map[string]bool
	bound  map[types.UID]bool
	gangs  map[string]*gangPlacement
	// notify is closed and dropped when a pod is bound (changed).
	notify chan struct{}
}

type gangPlacement struct {
	size, lowerBound int
	nodes            []string
}

// recordPlacement starts a recorder for the workload of tCtx. At the end
// of the workload, before scheduler_perf cancels tCtx and stops the
// apiserver (a cleanup registered now runs before those registered when the
// cluster was set up), it waits until its informer has seen every gang pod
// bound, then hands the summary to done.
func recordPlacement(tCtx ktesting.TContext, done func(benchfmt.Placement)) error {
	r := &placementRecorder{
		leaf: map[string]string{}, spine: map[string]string{}, free: map[string]int64{},
		nodeOK: map[string]bool{}, bound: map[types.UID]bool{}, gangs: map[string]*gangPlacement{},
	}
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.node(obj) },
	}); err != nil {
		return err
	}
	pod := func(obj any) {
		if p, ok := obj.(*v1.Pod); ok {
			r.pod(p)
		}
	}
	pods := factory.Core().V1().Pods()
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pod,
		UpdateFunc: func(_, obj any) { pod(obj) },
	}); err != nil {
		return err
	}
	factory.Start(stop)
	factory.WaitForCacheSync(tCtx.Done())
	tCtx.TB().Cleanup(func() {
		defer factory.Shutdown()
		defer close(stop)
		// Caught up: every gang pod the informer holds is bound and counted.
		caughtUp := func() bool {
			list, err := pods.Lister().List(labels.Everything())
			if err != nil {
				return false
			}
			want := 0
			for _, p := range list {
				if p.Labels[gangLabel] == "" {
					continue
				}
				if p.Spec.NodeName == "" {
					return false
				}
				want++
			}
			return r.gangPods() == want
		}
		deadline := time.Now().Add(time.Minute)
		for !caughtUp() && time.Now().Before(deadline) && tCtx.Err() == nil {
			select {
			case <-r.changed():
			case <-time.After(time.Second):
			}
		}
		done(r.summary(tCtx.Name()))
	})
	return nil
}

// gangPods is how many bound gang members the recorder has counted.
func (r *placementRecorder) gangPods() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.gangs {
		n += len(g.nodes)
	}
	return n
}

// changed is closed at the recorder's next bound pod.
func (r *placementRecorder) changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notify == nil {
		r.notify = make(chan struct{})
	}
	return r.notify
}

func (r *placementRecorder) node(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nodeOK[n.Name] {
		return
	}
	r.nodeOK[n.Name] = true
	r.leaf[n.Name], r.spine[n.Name] = n.Labels[leafLabel], n.Labels[spineLabel]
	q := n.Status.Allocatable[gpuResource]
	r.free[n.Name] += q.Value()
}

func (r *placementRecorder) pod(p *v1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bound[p.UID] {
		return
	}
	r.bound[p.UID] = true
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
	if name := p.Labels[gangLabel]; name != "" {
		g := r.gangs[name]
		if g == nil {
			size, _ := strconv.Atoi(p.Labels[gangSizeLabel])
			g = &gangPlacement{size: size, lowerBound: r.lowerBound(size)}
			r.gangs[name] = g
		}
		g.nodes = append(g.nodes, p.Spec.NodeName)
	}
	var gpus int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Requests[gpuResource]
		gpus += q.Value()
	}
	r.free[p.Spec.NodeName] -= gpus
}

// lowerBound is the fewest leaves whose whole free nodes hold size nodes
// (taking the leaves with the most first is optimal), or 0 if none do.
func (r *placementRecorder) lowerBound(size int) int {
	perLeaf := map[string]int{}
	for node, free := range r.free {
		if free >= 8 && r.nodeOK[node] {
			perLeaf[r.leaf[node]]++
		}
	}
	counts := make([]int, 0, len(perLeaf))
	for _, n := range perLeaf {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	held := 0
	for i, n := range counts {
		if held += n; held >= size {
			return i + 1
		}
	}
	return 0
}

// summary sums up the gangs placed whole, by size.
func (r *placementRecorder) summary(workload string) benchfmt.Placement {
	r.mu.Lock()
	defer r.mu.Unlock()
	bySize := map[int]*benchfmt.GangSpread{}
	for _, g := range r.gangs {
		if len(g.nodes) < g.size || g.size == 0 {
			continue
		}
		s := bySize[g.size]
		if s == nil {
			s = &benchfmt.GangSpread{Nodes: g.size}
			bySize[g.size] = s
		}
		leaves, spines := map[string]bool{}, map[string]bool{}
		for _, n := range g.nodes {
			leaves[r.leaf[n]], spines[r.spine[n]] = true, true
		}
		s.Gangs++
		s.Leaves += float64(len(leaves))
		s.Spines += float64(len(spines))
		s.LowerBound += float64(g.lowerBound)
		if g.lowerBound > 0 && len(leaves) <= g.lowerBound {
			s.AtBound++
		}
	}
	out := benchfmt.Placement{Workload: workload}
	for _, size := range slices.Sorted(maps.Keys(bySize)) {
		s := bySize[size]
		n := float64(s.Gangs)
		s.Leaves, s.Spines, s.LowerBound = s.Leaves/n, s.Spines/n, s.LowerBound/n
		out.BySize = append(out.BySize, *s)
	}
	return out
}
