// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// capacitySampler reports, when /metrics is scraped, the GPUs of the
// nodes by who requests them and the free GPUs under each fabric switch
// that has GPU nodes,
// as Kubernetes sees them (bound, not terminated pods' requests; GPUs
// Slurm jobs hold on shared nodes are not subtracted). One pass over the
// scheduler's node and pod caches.
func capacitySampler(nodes corelisters.NodeLister, pods corelisters.PodLister, classes *overflow.Classes, tracker *fabric.Tracker, gpu v1.ResourceName) metrics.Sampler {
	return func(emit metrics.Emit) {
		nodeList, err := nodes.List(labels.Everything())
		if err != nil {
			return
		}
		podList, err := pods.List(labels.Everything())
		if err != nil {
			return
		}
		gpus := capacity.GPUsByNode(nodeList, podList, gpu, classes.ClassOf)
		const physical, onOverflow = "physical", "overflow"
		overflowNode := make(map[string]bool, len(nodeList))
		used := map[[2]string]int64{}
		for _, n := range nodeList {
			where := physical
			if classes.IsOverflowNode(n) {
				where, overflowNode[n.Name] = onOverflow, true
			}
			g := gpus[n.Name]
			for class, r := range g.Requested {
				used[[2]string{where, class}] += r
			}
			used[[2]string{where, "free"}] += g.Free()
		}
		for _, where := range []string{physical, onOverflow} {
			for _, class := range []string{"research", "production", "other", "free"} {
				emit(metrics.CapacityGPUs, float64(used[[2]string{where, class}]), where, class)
			}
		}

		tree, err := tracker.Tree()
		if err != nil {
			return
		}
		for level := fabric.NodeLevel + 1; level < tree.RootLevel(); level++ {
			name := tree.LevelName(level)
			var largest int64
			for _, d := range tree.Domains(level) {
				var sum int64
				withGPUs := false
				for _, i := range tree.NodesOf(d) {
					n := tree.Node(i).Name
					g := gpus[n]
					if overflowNode[n] || g == nil || g.Allocatable == 0 {
						continue
					}
					sum += g.Free()
					withGPUs = true
				}
				// A domain of CPU nodes has no series: an unlabelled
				// node is a domain of its own at every level, and a
				// cluster's CPU nodes would add series per node to
				// every scrape.
				if !withGPUs {
					continue
				}
				largest = max(largest, sum)
				emit(metrics.FabricFreeGPUs, float64(sum), name, d.Name)
			}
			emit(metrics.FabricLargestFreeGPUs, float64(largest), name)
		}
	}
}
