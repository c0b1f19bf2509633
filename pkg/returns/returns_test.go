// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package returns

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

type claimsRunning bool

func (c claimsRunning) Active() bool { return bool(c) }

// world is a physical node n0 (8 GPUs), an overflow node vk running one
// production pod of 8 GPUs, and a fake apiserver that takes evictions.
type world struct {
	t         *testing.T
	informers informers.SharedInformerFactory
	rc        *Controller
	mu        sync.Mutex
	evicted   []string
}

func newWorld(t *testing.T, claims Claims) *world {
	w := &world{t: t}
	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		w.evicted = append(w.evicted, ev.Name)
		return true, ev, nil
	})
	w.informers = informers.NewSharedInformerFactory(client, 0)
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	w.rc = New(Config{
		Return:  &config.ReturnConfig{Enabled: true, HysteresisSeconds: 60, MaxPodsPerWave: 10, PollIntervalSeconds: 1},
		Classes: classes, Client: client, Informers: w.informers,
		Waves:  overflow.NewWaves(client, w.informers, events.NewFakeRecorder(10), overflow.MoveReturn),
		Claims: claims,
	})
	gpu8 := map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
	n0 := st.MakeNode().Name("n0").Capacity(gpu8).Obj()
	vk := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(gpu8).Obj()
	for _, n := range []*v1.Node{n0, vk} {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		w.store(n)
	}
	serve := st.MakePod().Namespace("prod").Name("serve").UID("serve").Node("vk").
		Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Toleration("virtual-kubelet.io/provider").Obj()
	serve.Spec.PriorityClassName = "production"
	serve.Status.Phase = v1.PodRunning
	serve.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	w.store(serve)
	return w
}

func (w *world) store(obj runtime.Object) {
	w.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Node:
		err = w.informers.Core().V1().Nodes().Informer().GetStore().Update(o)
	case *v1.Pod:
		err = w.informers.Core().V1().Pods().Informer().GetStore().Update(o)
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) remove(pod *v1.Pod) {
	w.t.Helper()
	if err := w.informers.Core().V1().Pods().Informer().GetStore().Delete(pod); err != nil {
		w.t.Fatal(err)
	}
}

// filler takes all of n0's GPUs.
func filler() *v1.Pod {
	return st.MakePod().Namespace("research").Name("filler").UID("filler").Node("n0").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Obj()
}

func (w *world) moves() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.evicted)
}

// TestHysteresis: production moves back only once physical room for it
// has stayed free for the whole window; room that is taken again resets
// the window.
func TestHysteresis(t *testing.T) {
	w := newWorld(t, claimsRunning(false))
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w.store(filler())

	w.rc.tick(ctx, t0) // no room
	w.remove(filler())
	w.rc.tick(ctx, t0.Add(10*time.Second)) // room: the window starts at 10 s
	w.rc.tick(ctx, t0.Add(69*time.Second)) // 59 s of room
	if w.moves() != 0 {
		t.Fatalf("moved after %s of room, before the 60 s window", 59*time.Second)
	}
	// Taken again at 69 s, free again at 80 s: the window starts over.
	w.store(filler())
	w.rc.tick(ctx, t0.Add(70*time.Second))
	w.remove(filler())
	w.rc.tick(ctx, t0.Add(80*time.Second))
	w.rc.tick(ctx, t0.Add(139*time.Second))
	if w.moves() != 0 {
		t.Fatal("flapping room moved production back")
	}
	w.rc.tick(ctx, t0.Add(140*time.Second)) // 60 s of room since 80 s
	if w.moves() != 1 {
		t.Fatalf("%d moves after a full window of room, want 1", w.moves())
	}
}

// TestNoReturnsWhileResearchNeedsRoom: a running claim, or a research pod
// waiting, keeps production on the overflow node.
func TestNoReturnsWhileResearchNeedsRoom(t *testing.T) {
	for _, tt := range []struct {
		name    string
		claims  Claims
		waiting bool
	}{
		{"a claim runs", claimsRunning(true), false},
		{"a research pod waits", claimsRunning(false), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.claims)
			if tt.waiting {
				p := st.MakePod().Namespace("research").Name("wait").UID("wait").Obj()
				p.Spec.PriorityClassName = "research"
				w.store(p)
			}
			ctx := context.Background()
			t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			for i := range 5 {
				w.rc.tick(ctx, t0.Add(time.Duration(i)*time.Minute))
			}
			if w.moves() != 0 {
				t.Errorf("%d pods moved back while research needs the room", w.moves())
			}
		})
	}
}
