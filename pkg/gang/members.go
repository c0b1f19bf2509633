// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// memberIndex indexes pods by gang (Key.String()).
const memberIndex = "sluice.dev/gang"

// MemberIndex lists the pods of gangs of both APIs from the scheduler's pod
// informer.
type MemberIndex struct {
	indexer cache.Indexer
}

// NewMemberIndex indexes the pod informer by gang. It must run before the
// informer starts (the runtime builds it while plugins are built).
func NewMemberIndex(podInformer cache.SharedIndexInformer) (*MemberIndex, error) {
	m := &MemberIndex{indexer: podInformer.GetIndexer()}
	if _, ok := m.indexer.GetIndexers()[memberIndex]; ok {
		return m, nil
	}
	err := podInformer.AddIndexers(cache.Indexers{memberIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		if key, ok := KeyOf(pod); ok {
			return []string{key.String()}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing pods by gang: %w", err)
	}
	return m, nil
}

// List returns the live members of a gang: pods that are neither being
// deleted nor finished.
func (m *MemberIndex) List(key Key) ([]*v1.Pod, error) {
	objs, err := m.indexer.ByIndex(memberIndex, key.String())
	if err != nil {
		return nil, fmt.Errorf("listing members of gang %s: %w", key, err)
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		pod := o.(*v1.Pod)
		if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		pods = append(pods, pod)
	}
	return pods, nil
}
