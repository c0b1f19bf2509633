// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// gpuIndex indexes, under the one value withGPUs, the nodes that offer
// the GPU resource and the bound pods that name it.
const (
	gpuIndex = "sluice.dev/gpus"
	withGPUs = "gpus"
)

// GPUIndex finds the nodes that offer GPUs and the bound pods that ask for
// them through informer indexes, which the informers keep as objects
// change: what reads GPUs reads those, not every node and pod of a
// cluster whose CPU nodes may outnumber its GPU nodes many times.
type GPUIndex struct {
	nodes, pods cache.Indexer
}

// GPUIndexers are the indexers a GPUIndex reads, for the node and the pod
// informer (or indexer) respectively.
func GPUIndexers(gpu v1.ResourceName) (nodes, pods cache.Indexers) {
	nodes = cache.Indexers{gpuIndex: func(obj any) ([]string, error) {
		if n, ok := obj.(*v1.Node); ok {
			if q, ok := n.Status.Allocatable[gpu]; ok && q.Sign() > 0 {
				return []string{withGPUs}, nil
			}
		}
		return nil, nil
	}}
	pods = cache.Indexers{gpuIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" && names(p, gpu) {
			return []string{withGPUs}, nil
		}
		return nil, nil
	}}
	return nodes, pods
}

// NewGPUIndex indexes the node and pod informers by GPUs (once: a second
// call reuses the indexes).
func NewGPUIndex(nodeInformer, podInformer cache.SharedIndexInformer, gpu v1.ResourceName) (*GPUIndex, error) {
	nodes, pods := GPUIndexers(gpu)
	for _, add := range []struct {
		what     string
		inf      cache.SharedIndexInformer
		indexers cache.Indexers
	}{{"nodes", nodeInformer, nodes}, {"pods", podInformer, pods}} {
		if _, ok := add.inf.GetIndexer().GetIndexers()[gpuIndex]; ok {
			continue
		}
		if err := add.inf.AddIndexers(add.indexers); err != nil {
			return nil, fmt.Errorf("indexing %s by GPUs: %w", add.what, err)
		}
	}
	return IndexedGPUs(nodeInformer.GetIndexer(), podInformer.GetIndexer()), nil
}

// IndexedGPUs reads indexers that have GPUIndexers' indexes.
func IndexedGPUs(nodes, pods cache.Indexer) *GPUIndex {
	return &GPUIndex{nodes: nodes, pods: pods}
}

// List returns the nodes that offer GPUs or have a pod that asks for them
// bound, and the bound pods that ask for GPUs (finished ones too:
// GPUsByNode leaves those out). Given to GPUsByNode, they count what the
// whole cluster's nodes and pods would: a node without GPUs and without
// such a pod counts 0 everywhere.
func (x *GPUIndex) List() ([]*v1.Node, []*v1.Pod, error) {
	nodeObjs, err := x.nodes.ByIndex(gpuIndex, withGPUs)
	if err != nil {
		return nil, nil, err
	}
	podObjs, err := x.pods.ByIndex(gpuIndex, withGPUs)
	if err != nil {
		return nil, nil, err
	}
	nodes := make([]*v1.Node, 0, len(nodeObjs))
	listed := make(map[string]bool, len(nodeObjs))
	for _, o := range nodeObjs {
		n := o.(*v1.Node)
		nodes, listed[n.Name] = append(nodes, n), true
	}
	pods := make([]*v1.Pod, 0, len(podObjs))
	for _, o := range podObjs {
		p := o.(*v1.Pod)
		pods = append(pods, p)
		if listed[p.Spec.NodeName] {
			continue
		}
		listed[p.Spec.NodeName] = true
		// A node without GPUs that runs a pod asking for them (an
		// overflow node may offer none while its pods ask).
		if o, ok, err := x.nodes.GetByKey(p.Spec.NodeName); err == nil && ok {
			nodes = append(nodes, o.(*v1.Node))
		}
	}
	return nodes, pods, nil
}
