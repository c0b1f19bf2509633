// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// capacitySampler reports, when /metrics is scraped, the GPUs of the
// nodes by who requests them and the free GPUs under each fabric switch,
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
		free := make(map[string]int64, len(nodeList))
		overflowNode := make(map[string]bool, len(nodeList))
		for _, n := range nodeList {
			q := n.Status.Allocatable[gpu]
			free[n.Name] = q.Value()
			overflowNode[n.Name] = classes.IsOverflowNode(n)
		}
		const physical, onOverflow = "physical", "overflow"
		used := map[[2]string]int64{}
		for _, p := range podList {
			if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			if _, ok := free[p.Spec.NodeName]; !ok {
				continue
			}
			q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[gpu]
			n := q.Value()
			if n == 0 {
				continue
			}
			class := "other"
			switch {
			case classes.IsResearch(p):
				class = "research"
			case classes.IsProduction(p):
				class = "production"
			}
			where := physical
			if overflowNode[p.Spec.NodeName] {
				where = onOverflow
			}
			used[[2]string{where, class}] += n
			free[p.Spec.NodeName] -= n
		}
		freeSum := map[string]int64{}
		for name, f := range free {
			where := physical
			if overflowNode[name] {
				where = onOverflow
			}
			freeSum[where] += max(f, 0)
		}
		for _, where := range []string{physical, onOverflow} {
			for _, class := range []string{"research", "production", "other"} {
				emit(metrics.CapacityGPUs, float64(used[[2]string{where, class}]), where, class)
			}
			emit(metrics.CapacityGPUs, float64(freeSum[where]), where, "free")
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
				physicalNodes := false
				for _, i := range tree.NodesOf(d) {
					if n := tree.Node(i).Name; !overflowNode[n] {
						sum += max(free[n], 0)
						physicalNodes = true
					}
				}
				if !physicalNodes {
					continue
				}
				largest = max(largest, sum)
				emit(metrics.FabricFreeGPUs, float64(sum), name, d.Name)
			}
			emit(metrics.FabricLargestFreeGPUs, float64(largest), name)
		}
	}
}
