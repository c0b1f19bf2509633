// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// NodeGPUs is a node's GPUs: what it offers and what bound pods request,
// by class.
type NodeGPUs struct {
	Allocatable int64
	Requested   map[string]int64
}

// Free is the allocatable GPUs no bound pod requests (never negative).
func (n *NodeGPUs) Free() int64 {
	free := n.Allocatable
	for _, r := range n.Requested {
		free -= r
	}
	return max(free, 0)
}

// GPUsByNode is each node's GPUs (resource gpu): allocatable, and the
// requests of the pods bound to it and not finished, summed by class
// (class(pod), e.g. research, production, other). Pods bound to nodes not
// listed are left out.
func GPUsByNode(nodes []*v1.Node, pods []*v1.Pod, gpu v1.ResourceName, class func(*v1.Pod) string) map[string]*NodeGPUs {
	out := make(map[string]*NodeGPUs, len(nodes))
	for _, n := range nodes {
		q := n.Status.Allocatable[gpu]
		out[n.Name] = &NodeGPUs{Allocatable: q.Value(), Requested: map[string]int64{}}
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		n, ok := out[p.Spec.NodeName]
		if !ok {
			continue
		}
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[gpu]
		if q.Value() > 0 {
			n.Requested[class(p)] += q.Value()
		}
	}
	return out
}
