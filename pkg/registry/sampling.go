// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"cmp"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// capacitySampleMaxAge is how long a scrape reuses the capacity gauges'
// last sample: on 5,000 GPU nodes a sample costs about 35 ms of CPU,
// which a scraper every second (scheduler_perf's harness gathers the
// registry each second) takes from scheduling cycles.
const capacitySampleMaxAge = 10 * time.Second

// capacitySampler reports, when /metrics is scraped, the GPUs of the
// nodes by who requests them and the free GPUs under each fabric switch
// that has GPU nodes, as Kubernetes sees them (bound, not terminated pods'
// requests; GPUs Slurm jobs hold on shared nodes are not subtracted). It
// reads only the nodes that offer GPUs and the pods that ask for them
// (index), so a scrape costs nothing per CPU node or CPU pod.
func capacitySampler(index *capacity.GPUIndex, classes *overflow.Classes, tracker *fabric.Tracker, gpu v1.ResourceName) metrics.Sampler {
	return func(emit metrics.Emit) {
		nodeList, podList, err := index.List()
		if err != nil {
			return
		}
		gpus := capacity.GPUsByNode(nodeList, podList, gpu, classes.ClassOf)
		const physical, onOverflow = "physical", "overflow"
		used := map[[2]string]int64{}
		// The physical nodes with GPUs, for the fabric's domains.
		var inFabric []*capacity.NodeGPUs
		var names []string
		for _, n := range nodeList {
			where := physical
			if classes.IsOverflowNode(n) {
				where = onOverflow
			}
			g := gpus[n.Name]
			for class, r := range g.Requested {
				used[[2]string{where, class}] += r
			}
			used[[2]string{where, "free"}] += g.Free()
			if where == physical && g.Allocatable > 0 {
				inFabric, names = append(inFabric, g), append(names, n.Name)
			}
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
		// Only domains with GPU nodes have a series: an unlabelled node
		// is a domain of its own at every level, and a cluster's CPU
		// nodes would add series per node to every scrape.
		for level := fabric.NodeLevel + 1; level < tree.RootLevel(); level++ {
			free := map[*fabric.Domain]int64{}
			var domains []*fabric.Domain
			for i, g := range inFabric {
				n, ok := tree.NodeIndex(names[i])
				if !ok {
					continue
				}
				d := tree.Ancestor(n, level)
				if d.Level != level {
					continue
				}
				if _, seen := free[d]; !seen {
					domains = append(domains, d)
				}
				free[d] += g.Free()
			}
			slices.SortFunc(domains, func(a, b *fabric.Domain) int { return cmp.Compare(a.Name, b.Name) })
			name := tree.LevelName(level)
			var largest int64
			for _, d := range domains {
				largest = max(largest, free[d])
				emit(metrics.FabricFreeGPUs, float64(free[d]), name, d.Name)
			}
			emit(metrics.FabricLargestFreeGPUs, float64(largest), name)
		}
	}
}
