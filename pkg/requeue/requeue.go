// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package requeue puts pods back in the scheduling queue when something
// the queue does not watch changes: a Slurm snapshot, room on an overflow
// node, a scheduler-plugins PodGroup (a CRD kube-scheduler has no informer
// for). The framework's queueing hints cover the objects it watches; a
// plugin that rejects pods for a reason only such a source can lift
// remembers them here and activates them when the source changes, instead
// of leaving them to the periodic flush of unschedulable pods (five
// minutes by default).
package requeue

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Activator moves pods to the active queue: the framework handle.
type Activator interface {
	Activate(logger klog.Logger, pods map[string]*v1.Pod)
}

// Waiting is a set of pods rejected for a reason an external source may
// lift.
type Waiting struct {
	activator Activator
	mu        sync.Mutex
	pods      map[string]*v1.Pod // by namespace/name
}

// NewWaiting remembers pods and activates them through a.
func NewWaiting(a Activator) *Waiting {
	return &Waiting{activator: a, pods: map[string]*v1.Pod{}}
}

// Add remembers pods.
func (w *Waiting) Add(pods ...*v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range pods {
		w.pods[p.Namespace+"/"+p.Name] = p
	}
}

// Len is the number of pods remembered.
func (w *Waiting) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pods)
}

// ActivateAll moves every remembered pod to the active queue and forgets
// them (they are remembered again if rejected again).
func (w *Waiting) ActivateAll(logger klog.Logger, why string) {
	w.mu.Lock()
	pods := w.pods
	w.pods = map[string]*v1.Pod{}
	w.mu.Unlock()
	Activate(logger, w.activator, why, pods)
}

// Activate moves pods to the active queue through a, logging why.
func Activate(logger klog.Logger, a Activator, why string, pods map[string]*v1.Pod) {
	if len(pods) == 0 || a == nil {
		return
	}
	logger.V(4).Info("Requeueing pods", "pods", len(pods), "why", why)
	a.Activate(logger, pods)
}

// OnNamespaceLabels calls f when a namespace is added or its labels
// change: the tenancy policy selects namespaces by label, so pods it
// turned away may now be let in (and the queue watches no namespaces).
func OnNamespaceLabels(informer cache.SharedIndexInformer, f func()) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { f() },
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Namespace)
			cur, ok2 := newObj.(*v1.Namespace)
			if ok1 && ok2 && !maps.Equal(old.Labels, cur.Labels) {
				f()
			}
		},
	})
	return err
}
