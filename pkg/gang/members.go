// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// memberIndex indexes pods by "<namespace>/<label gang name>".
const memberIndex = "sluice.dev/label-gang"

// Members lists the pods of label gangs from the scheduler's pod informer.
type Members struct {
	indexer cache.Indexer
}

// NewMembers indexes the pod informer by label gang. It must run before the
// informer starts (plugin construction does); if it has started already,
// Members falls back to label selection.
func NewMembers(podInformer cache.SharedIndexInformer) *Members {
	m := &Members{indexer: podInformer.GetIndexer()}
	if _, ok := m.indexer.GetIndexers()[memberIndex]; ok {
		return m
	}
	_ = podInformer.AddIndexers(cache.Indexers{memberIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		if name := pod.Labels[v1alpha1.PodGroupLabel]; name != "" {
			return []string{pod.Namespace + "/" + name}, nil
		}
		return nil, nil
	}})
	return m
}

// List returns the live members of a label gang: pods with its label that
// are neither being deleted nor finished.
func (m *Members) List(namespace, name string) ([]*v1.Pod, error) {
	var objs []any
	var err error
	if _, ok := m.indexer.GetIndexers()[memberIndex]; ok {
		objs, err = m.indexer.ByIndex(memberIndex, namespace+"/"+name)
	} else {
		sel := labels.SelectorFromSet(labels.Set{v1alpha1.PodGroupLabel: name})
		err = cache.ListAllByNamespace(m.indexer, namespace, sel, func(o any) { objs = append(objs, o) })
	}
	if err != nil {
		return nil, fmt.Errorf("listing members of gang %s/%s: %w", namespace, name, err)
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
