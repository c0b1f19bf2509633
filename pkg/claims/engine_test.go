// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflow"
)

// world is the cluster an engine sees: informer stores it reads, a fake
// apiserver that takes evictions, a fake clock.
type world struct {
	t         *testing.T
	informers informers.SharedInformerFactory
	client    *fake.Clientset
	clock     *testingclock.FakeClock
	events    *events.FakeRecorder
	engine    *Engine

	mu        sync.Mutex
	evictions []string
	// refuse makes every eviction fail with this error.
	refuse error
	// activated are the claimants handed back to the queue.
	activated [][]*v1.Pod
}

func newWorld(t *testing.T, timeout time.Duration) *world {
	w := &world{t: t, client: fake.NewClientset(), clock: testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)),
		events: events.NewFakeRecorder(100)}
	w.informers = informers.NewSharedInformerFactory(w.client, 0)
	w.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.refuse != nil {
			return true, nil, w.refuse
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		w.evictions = append(w.evictions, ev.Name)
		return true, ev, nil
	})
	w.engine = NewEngine(Config{
		Waves:    overflow.NewWaves(w.client, w.informers, w.events, overflow.MovePreemption),
		Pods:     w.informers.Core().V1().Pods().Lister(),
		Recorder: w.events,
		Timeout:  timeout,
		Activate: func(_ context.Context, pods []*v1.Pod) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.activated = append(w.activated, pods)
		},
		Clock: w.clock,
	})
	return w
}

func (w *world) add(objs ...runtime.Object) {
	w.t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Pod:
			err = w.informers.Core().V1().Pods().Informer().GetStore().Add(o)
		case *appsv1.ReplicaSet:
			err = w.informers.Apps().V1().ReplicaSets().Informer().GetStore().Update(o)
		case *policyv1.PodDisruptionBudget:
			err = w.informers.Policy().V1().PodDisruptionBudgets().Informer().GetStore().Update(o)
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) gone(pods ...*v1.Pod) {
	w.t.Helper()
	for _, p := range pods {
		if err := w.informers.Core().V1().Pods().Informer().GetStore().Delete(p); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) evicted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.evictions...)
}

// victims are n production pods of ReplicaSet rs on node n0.
func victims(n int) ([]*v1.Pod, *appsv1.ReplicaSet) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "rs", UID: "rs"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n))}, Status: appsv1.ReplicaSetStatus{ReadyReplicas: int32(n)}}
	var pods []*v1.Pod
	for i := range n {
		name := fmt.Sprintf("v%d", i)
		p := st.MakePod().Namespace("prod").Name(name).UID(name).Node("n0").Labels(map[string]string{"app": "serve"}).
			OwnerReference("rs", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
		pods = append(pods, p)
	}
	return pods, rs
}

func budget(allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "pdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func claimant(name string) *v1.Pod {
	p := st.MakePod().Namespace("research").Name(name).UID(name).Obj()
	p.Spec.PriorityClassName = "research"
	return p
}

func newClaim(victims []*v1.Pod, claimants ...*v1.Pod) *Claim {
	nominations := map[string]string{}
	for _, c := range claimants {
		nominations[c.Namespace+"/"+c.Name] = "n0"
	}
	return &Claim{Key: "research/train", Domain: "n0", Claimants: claimants, Nominations: nominations, Victims: victims, Note: "test"}
}

// TestWavesFollowTheBudget: a budget allowing one disruption makes one
// eviction per wave; the next wave starts only once the last wave's pods
// are gone and their ReplicaSet is Ready again; when the last wave is done
// the claimants are activated.
func TestWavesFollowTheBudget(t *testing.T) {
	w := newWorld(t, time.Minute)
	pods, rs := victims(2)
	train := claimant("train")
	w.add(pods[0], pods[1], rs, budget(1), train)
	w.engine.Start(newClaim(pods, train))
	ctx := context.Background()

	w.engine.Step(ctx)
	if got := w.evicted(); len(got) != 1 || got[0] != "v0" {
		t.Fatalf("wave 1 evicted %v, want [v0]", got)
	}
	w.engine.Step(ctx) // v0 not gone yet: no new wave
	if got := w.evicted(); len(got) != 1 {
		t.Fatalf("evicted %v before wave 1 finished", got)
	}
	w.gone(pods[0])
	rs = rs.DeepCopy()
	rs.Status.ReadyReplicas = 1 // the replacement is not Ready yet
	w.add(rs)
	w.engine.Step(ctx)
	if got := w.evicted(); len(got) != 1 {
		t.Fatalf("evicted %v before the replacement was Ready", got)
	}
	rs = rs.DeepCopy()
	rs.Status.ReadyReplicas = 2
	w.add(rs)
	w.engine.Step(ctx) // wave 1 done; wave 2
	if got := w.evicted(); len(got) != 2 || got[1] != "v1" {
		t.Fatalf("wave 2: evicted %v, want [v0 v1]", got)
	}
	w.gone(pods[1])
	w.engine.Step(ctx) // the last wave is done: the claimants go back to the queue
	if len(w.activated) != 1 || w.activated[0][0].Name != "train" {
		t.Errorf("activated %v, want the claimant", w.activated)
	}
	if !w.engine.Active() || !w.engine.NodeClaimed("n0") {
		t.Error("the claim ended before its claimants were bound")
	}
	w.engine.Bound(train)
	if w.engine.Active() || w.engine.NodeClaimed("n0") {
		t.Error("the claim lives on after its claimants were bound")
	}
}

// TestEveryClaimEnds: whatever stops a claim from making progress, it is
// given up after its timeout, with an Event on the claimants saying why.
func TestEveryClaimEnds(t *testing.T) {
	for _, tt := range []struct {
		name   string
		refuse error
		budget int32
		want   string
	}{
		{"every eviction fails (a pod under two budgets: HTTP 500)", apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget")), 1, "every eviction it tried failed"},
		{"the apiserver refuses evictions the lister allowed (HTTP 429)", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10), 1, "every eviction it tried failed"},
		{"no budget allows an eviction", nil, 0, "PodDisruptionBudgets allowed no eviction"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, time.Minute)
			w.refuse = tt.refuse
			pods, rs := victims(2)
			train := claimant("train")
			w.add(pods[0], pods[1], rs, budget(tt.budget), train)
			w.engine.Start(newClaim(pods, train))
			ctx := context.Background()
			for range 5 {
				w.engine.Step(ctx)
			}
			if !w.engine.Active() {
				t.Fatal("the claim ended before its timeout")
			}
			w.clock.Step(61 * time.Second)
			w.engine.Step(ctx)
			if w.engine.Active() || w.engine.NodeClaimed("n0") {
				t.Fatal("the claim lives on after its timeout")
			}
			if e := <-w.events.Events; !strings.Contains(e, "Warning ClaimGivenUp gave up freeing n0 after 1m0s: "+tt.want) {
				t.Errorf("event %q", e)
			}
		})
	}
}

// TestClaimDroppedWhenClaimantsGone: a claim whose research pods were
// deleted is dropped at once, its nodes free for other claims.
func TestClaimDroppedWhenClaimantsGone(t *testing.T) {
	w := newWorld(t, time.Minute)
	pods, rs := victims(1)
	train := claimant("train")
	w.add(pods[0], rs, budget(0), train)
	w.engine.Start(newClaim(pods, train))
	w.gone(train)
	w.engine.Step(context.Background())
	if w.engine.Active() || w.engine.Get("research/train") != nil {
		t.Error("the claim of deleted pods lives on")
	}
}
