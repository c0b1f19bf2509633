// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package returns

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// wave is one return wave in flight: the pods it evicted and, per
// controller, how many replacements it waits for. A replacement counts
// once it has been seen Ready on a physical node, even if it moves on
// right after (a research claim may evict it again): the wave is over
// then, whatever happens to the pod next.
type wave struct {
	pods    []*v1.Pod
	started time.Time
	since   metav1.Time
	wanted  map[types.UID]int // controller -> replacements awaited
	ns      map[types.UID]string

	mu   sync.Mutex
	seen map[types.UID]types.UID // replacement -> controller
}

func newWave(pods []*v1.Pod, started time.Time) *wave {
	w := &wave{pods: pods, started: started, since: metav1.NewTime(started.Truncate(time.Second)),
		wanted: map[types.UID]int{}, ns: map[types.UID]string{}, seen: map[types.UID]types.UID{}}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil {
			w.wanted[ref.UID]++
			w.ns[ref.UID] = p.Namespace
		}
	}
	return w
}

// observe counts p if it is one of the replacements the wave waits for,
// Ready on a node physical accepts.
func (w *wave) observe(p *v1.Pod, physical func(node string) bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || w.wanted[ref.UID] == 0 || p.Namespace != w.ns[ref.UID] || p.DeletionTimestamp != nil ||
		p.CreationTimestamp.Before(&w.since) || !podReady(p) || !physical(p.Spec.NodeName) {
		return
	}
	w.mu.Lock()
	w.seen[p.UID] = ref.UID
	w.mu.Unlock()
}

// done reports whether the wave's pods are gone (gone reports one) and
// every controller has had its replacements Ready on a physical node.
func (w *wave) done(gone func(*v1.Pod) bool) bool {
	for _, p := range w.pods {
		if !gone(p) {
			return false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[types.UID]int{}
	for _, owner := range w.seen {
		got[owner]++
	}
	for owner, n := range w.wanted {
		if got[owner] < n {
			return false
		}
	}
	return true
}
