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
// (class(pod), e.g. research, production, other; Requested is nil on a
// node where no such pod asks for GPUs). Pods bound to nodes not listed
// are left out. It runs on every /metrics scrape, so it allocates per
// node, not per pod, and reads the requests of only the pods that name
// the resource.
func GPUsByNode(nodes []*v1.Node, pods []*v1.Pod, gpu v1.ResourceName, class func(*v1.Pod) string) map[string]*NodeGPUs {
	all := make([]NodeGPUs, len(nodes))
	out := make(map[string]*NodeGPUs, len(nodes))
	for i, n := range nodes {
		q := n.Status.Allocatable[gpu]
		all[i].Allocatable = q.Value()
		out[n.Name] = &all[i]
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		n, ok := out[p.Spec.NodeName]
		if !ok {
			continue
		}
		if r := PodRequest(p, gpu); r > 0 {
			if n.Requested == nil {
				n.Requested = map[string]int64{}
			}
			n.Requested[class(p)] += r
		}
	}
	return out
}

// PodRequest is the pod's request of resource, as
// resourcehelper.PodRequests computes it, without building the pod's
// whole request list where that is not needed: a pod that names the
// resource nowhere requests none, and without init containers the request
// is its containers' sum plus its overhead.
func PodRequest(p *v1.Pod, resource v1.ResourceName) int64 {
	if !names(p, resource) {
		return 0
	}
	if len(p.Spec.InitContainers) > 0 || p.Spec.Resources != nil {
		q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[resource]
		return q.Value()
	}
	var sum int64
	for i := range p.Spec.Containers {
		if q, ok := p.Spec.Containers[i].Resources.Requests[resource]; ok {
			sum += q.Value()
		}
	}
	if q, ok := p.Spec.Overhead[resource]; ok {
		sum += q.Value()
	}
	return sum
}

// names reports whether the pod's spec names resource anywhere a request
// can come from: a container's or init container's requests or limits
// (an extended resource's request defaults to its limit), the pod's
// resources or its overhead. A pod that names it nowhere requests none.
func names(p *v1.Pod, resource v1.ResourceName) bool {
	in := func(r *v1.ResourceRequirements) bool {
		_, req := r.Requests[resource]
		_, lim := r.Limits[resource]
		return req || lim
	}
	for i := range p.Spec.Containers {
		if in(&p.Spec.Containers[i].Resources) {
			return true
		}
	}
	for i := range p.Spec.InitContainers {
		if in(&p.Spec.InitContainers[i].Resources) {
			return true
		}
	}
	if p.Spec.Resources != nil && in(p.Spec.Resources) {
		return true
	}
	_, overhead := p.Spec.Overhead[resource]
	return overhead
}
