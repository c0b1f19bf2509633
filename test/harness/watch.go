// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/internal/invariants"
)

// PodEvent is one change of a pod as an informer delivers it: Old is nil
// for an addition, New is nil for a deletion.
type PodEvent struct {
	Old, New *v1.Pod
}

// Pod is the pod after the event (before it, for a deletion).
func (e PodEvent) Pod() *v1.Pod {
	if e.New != nil {
		return e.New
	}
	return e.Old
}

// WatchPods calls handle for every change of every pod in namespace ns
// ("" for all) from now until the test ends, in the order the apiserver
// made them, one call at a time: an invariant checked there is checked at
// every step, not at the moments a poll happens to look. It returns once
// the existing pods have been delivered as additions.
func WatchPods(t testing.TB, cs kubernetes.Interface, ns string, handle func(PodEvent)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	var mu sync.Mutex
	call := func(e PodEvent) {
		mu.Lock()
		defer mu.Unlock()
		handle(e)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok {
				call(PodEvent{New: p})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Pod)
			n, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 {
				call(PodEvent{Old: o, New: n})
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				call(PodEvent{Old: p})
			}
		},
	})
	if err != nil {
		cancel()
		t.Fatalf("watching pods: %v", err)
	}
	factory.Start(ctx.Done())
	// Wait until the handler has seen every existing pod, not only until
	// the store is filled.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		cancel()
		t.Fatal("pod watch did not sync")
	}
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
}

// Violations collects invariant violations seen by watchers, to be
// reported at the end of a test (or earlier, with Check).
type Violations struct {
	mu   sync.Mutex
	list []string
}

// Addf records a violation.
func (v *Violations) Addf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, fmt.Sprintf(format, args...))
}

// Check fails the test with every violation recorded so far.
func (v *Violations) Check(t testing.TB) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.list {
		t.Error(s)
	}
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// WatchInvariants watches sluice's promises about claims in namespace ns
// (internal/invariants: no PodDisruptionBudget, nor the default budget of
// a controller without one, broken by an eviction, no
// research or controller-less pod evicted, no production evicted beyond
// overflowGPUs of room) from Arm until the test ends, and fails the test
// with every violation then. The overflow nodes are those labelled
// type=virtual-kubelet.
func WatchInvariants(t testing.TB, cp *ControlPlane, ns string, overflowGPUs int64) *invariants.Watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nodes := informers.NewSharedInformerFactory(cp.Client, 0)
	nodeInf := nodes.Core().V1().Nodes().Informer()
	nodes.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced) {
		cancel()
		t.Fatal("node watch did not sync")
	}
	isOverflow := func(name string) bool {
		obj, ok, _ := nodeInf.GetStore().GetByKey(name)
		return ok && obj.(*v1.Node).Labels["type"] == "virtual-kubelet"
	}
	w, err := invariants.Start(ctx, cp.Client, invariants.Options{Namespace: ns, OverflowGPUs: overflowGPUs, IsOverflowNode: isOverflow})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, v := range w.Violations() {
			t.Errorf("invariant: %s", v)
		}
		t.Logf("invariants: evictions %v, %d budget overdrafts, at most %d production GPUs on overflow nodes or waiting", w.Evictions(), w.Overdrafts(), w.PeakOverflowGPUs())
		cancel()
		nodes.Shutdown()
	})
	return w
}

// CheckGangsAtRest fails the test for every gang of ns partly bound at
// rest. The caller has seen the gangs bound through the API; the watcher's
// informer may not have seen the last binding yet, so a partly bound gang
// is looked at again until the watcher catches up (10 s at most): one that
// stays partly bound fails.
func CheckGangsAtRest(t testing.TB, w *invariants.Watcher) {
	t.Helper()
	var partly []string
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		partly = w.Gangs(invariants.GangOf)
		return len(partly) == 0, nil
	})
	for _, g := range partly {
		t.Errorf("invariant at rest: %s", g)
	}
}
