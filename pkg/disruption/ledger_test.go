// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// world is a ledger over informer stores the test fills by hand, and a
// fake apiserver that records evictions and deletes.
type world struct {
	t       *testing.T
	inf     informers.SharedInformerFactory
	ledger  *Ledger
	evicted []string
	deleted []string
	// refuse answers evictions with 429.
	refuse bool
}

func newWorld(t *testing.T) *world {
	w := &world{t: t}
	client := fake.NewClientset()
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if w.refuse {
			return true, nil, apierrors.NewTooManyRequests("budget", 1)
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		w.evicted = append(w.evicted, ev.Name)
		return true, ev, nil
	})
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		w.deleted = append(w.deleted, a.(k8stesting.DeleteAction).GetName())
		return true, nil, nil
	})
	w.inf = informers.NewSharedInformerFactory(client, 0)
	var err error
	if w.ledger, err = NewLedger(w.inf, intstr.FromString("25%"), client, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) put(obj runtime.Object) {
	w.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		err = w.inf.Core().V1().Pods().Informer().GetStore().Update(o)
	case *appsv1.ReplicaSet:
		err = w.inf.Apps().V1().ReplicaSets().Informer().GetStore().Update(o)
	case *policyv1.PodDisruptionBudget:
		err = w.inf.Policy().V1().PodDisruptionBudgets().Informer().GetStore().Update(o)
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) gone(p *v1.Pod) {
	if err := w.inf.Core().V1().Pods().Informer().GetStore().Delete(p); err != nil {
		w.t.Fatal(err)
	}
}

// rs adds a ReplicaSet of n Ready pods labelled app=name.
func (w *world) rs(name string, n int) []*v1.Pod {
	w.put(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID("rs-" + name)}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n))}})
	var out []*v1.Pod
	for i := range n {
		p := w.replica(name, fmt.Sprintf("%s-%d", name, i), true)
		w.put(p)
		out = append(out, p)
	}
	return out
}

func (w *world) replica(rs, name string, ready bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID(name), Labels: map[string]string{"app": rs},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("rs-" + rs), Controller: ptr.To(true)}}}}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status}}
	return p
}

// pdb puts a PodDisruptionBudget over app as the disruption controller
// would have written it: maxUnavailable of expected, healthy of them.
func (w *world) pdb(app string, maxUnavailable, expected, healthy int, version string, policy *policyv1.UnhealthyPodEvictionPolicyType, disrupted ...string) {
	mu := intstr.FromInt32(int32(maxUnavailable))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: app, Generation: 1, ResourceVersion: version},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, UnhealthyPodEvictionPolicy: policy},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: int32(expected), DesiredHealthy: int32(expected - maxUnavailable),
			CurrentHealthy: int32(healthy), DisruptionsAllowed: int32(max(healthy-(expected-maxUnavailable)-len(disrupted), 0))},
	}
	for _, name := range disrupted {
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[name] = metav1.Now()
	}
	w.put(pdb)
}

// move reserves and evicts pod; "" when it moved, otherwise why not.
func (w *world) move(pod *v1.Pod, recorded bool) string {
	w.t.Helper()
	b, why := w.ledger.Of(pod)
	if why != "" {
		return why
	}
	mv, why := w.ledger.Reserve(pod, b, recorded)
	if why != "" {
		return why
	}
	ok, err := mv.Evict(context.Background(), MovePreemption, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	if !ok {
		return "429"
	}
	return ""
}

// TestDefaultBudgetAcrossActors: a ReplicaSet of 8 without a PDB lets 2
// be down at once (25%), counted over every eviction the ledger issued
// and every pod not healthy, whoever evicted it: 8 healthy - 6 desired -
// 2 held = 0. Once the two terminate, 6 - 6 = 0 until a replacement is
// Ready: 7 - 6 = 1. A ledger built anew (a new leader) answers the same
// from the pods alone.
func TestDefaultBudgetAcrossActors(t *testing.T) {
	w := newWorld(t)
	pods := w.rs("serve", 8)
	for i, p := range pods[:3] {
		why := w.move(p, false)
		if i < 2 && why != "" {
			t.Fatalf("eviction %d refused: %s", i, why)
		}
		if i == 2 && !strings.Contains(why, "the default budget of prod/ReplicaSet/serve allows no more now") {
			t.Fatalf("third eviction: %q, want the default budget to allow no more", why)
		}
	}
	w.gone(pods[0])
	w.gone(pods[1])
	if why := w.move(pods[2], false); why == "" {
		t.Fatal("a third pod was evicted once the first two terminated, before any replacement was Ready")
	}
	again := newWorld(t)
	again.rs("serve", 8)
	again.gone(pods[0])
	again.gone(pods[1])
	if why := again.move(pods[2], false); why == "" {
		t.Fatal("a new ledger evicted a third pod with 2 of 8 down")
	}
	starting := w.replica("serve", "serve-new", false)
	w.put(starting)
	if why := w.move(pods[2], false); why == "" {
		t.Fatal("evicted with a replacement not Ready yet")
	}
	starting = starting.DeepCopy()
	starting.Status.Conditions[0].Status = v1.ConditionTrue
	w.put(starting)
	if why := w.move(pods[2], false); why != "" {
		t.Fatalf("refused with a replacement Ready (7 healthy, 6 desired): %s", why)
	}
	if got := len(w.evicted); got != 3 {
		t.Errorf("%d evictions, want 3", got)
	}
}

// TestPDB: a PodDisruptionBudget's status says what it allows; an eviction
// the ledger issued counts until the status shows it (a newer
// resourceVersion, or the pod among its disruptedPods).
func TestPDB(t *testing.T) {
	always := ptr.To(policyv1.AlwaysAllow)
	for _, tt := range []struct {
		name string
		// setup puts the PDB and returns the pod to move.
		setup    func(w *world, pods []*v1.Pod) *v1.Pod
		recorded bool
		want     string // "" moved (evicted), "delete" moved by a delete, else in why
	}{
		{name: "allowed", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil)
			return pods[0]
		}},
		{name: "none allowed", want: "PodDisruptionBudget serve allows no more now", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 3, "1", nil)
			return pods[0]
		}},
		{name: "an eviction held, not yet in the status", want: "allows no more now", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil)
			if why := w.move(pods[1], false); why != "" {
				t.Fatal(why)
			}
			return pods[0]
		}},
		{name: "an eviction the status shows, then given back", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil)
			if why := w.move(pods[1], false); why != "" {
				t.Fatal(why)
			}
			w.pdb("serve", 1, 4, 4, "3", nil) // the replacement is Ready
			return pods[0]
		}},
		{name: "unhealthy, AlwaysAllow", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 3, "1", always)
			p := w.replica("serve", "serve-0", false)
			w.put(p)
			return p
		}},
		{name: "unhealthy, IfHealthyBudget, healthy enough", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 3, "1", nil)
			p := w.replica("serve", "serve-0", false)
			w.put(p)
			return p
		}},
		{name: "unhealthy, IfHealthyBudget, below desired", want: "allows no more now", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 2, "1", nil)
			p := w.replica("serve", "serve-0", false)
			w.put(p)
			return p
		}},
		{name: "a cut-off eviction this ledger's caller recorded is finished", recorded: true, want: "delete", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil, "serve-0")
			return pods[0]
		}},
		{name: "a cut-off eviction nobody recorded is waited out", want: "allows no more now", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil, "serve-0")
			return pods[0]
		}},
		{name: "a 429 holds nothing", setup: func(w *world, pods []*v1.Pod) *v1.Pod {
			w.pdb("serve", 1, 4, 4, "1", nil)
			w.refuse = true
			if why := w.move(pods[1], false); why != "429" {
				t.Fatalf("want a 429, got %q", why)
			}
			w.refuse = false
			return pods[0]
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			pods := w.rs("serve", 4)
			pod := tt.setup(w, pods)
			evicted := len(w.evicted)
			why := w.move(pod, tt.recorded)
			switch tt.want {
			case "":
				if why != "" || len(w.evicted) != evicted+1 || len(w.deleted) != 0 {
					t.Fatalf("why %q, evicted %v, deleted %v; want it evicted", why, w.evicted, w.deleted)
				}
			case "delete":
				if why != "" || len(w.deleted) != 1 || len(w.evicted) != evicted {
					t.Fatalf("why %q, evicted %v, deleted %v; want it deleted", why, w.evicted, w.deleted)
				}
			default:
				if !strings.Contains(why, tt.want) || len(w.deleted) != 0 || len(w.evicted) != evicted {
					t.Fatalf("why %q, evicted %v, deleted %v; want it refused: %s", why, w.evicted, w.deleted, tt.want)
				}
			}
		})
	}
}

// TestSettling: a budget's pods settle from a move while one is being
// deleted or one not Ready is young, each for at most the window; a PDB's
// budget counts every pod it selects, whichever controller's.
func TestSettling(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	const window = 5 * time.Minute
	for _, tt := range []struct {
		name  string
		pod   func(*v1.Pod)
		other bool // the pod is another ReplicaSet's under the same PDB
		want  bool
	}{
		{"all Ready", func(*v1.Pod) {}, false, false},
		{"one being deleted", func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute))) }, false, true},
		{"one stuck deleting past the window", func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-window))) }, false, false},
		{"a replacement starting", func(p *v1.Pod) {
			p.Status.Conditions[0].Status = v1.ConditionFalse
			p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		}, false, true},
		{"a replacement never Ready past the window", func(p *v1.Pod) {
			p.Status.Conditions[0].Status = v1.ConditionFalse
			p.CreationTimestamp = metav1.NewTime(now.Add(-window))
		}, false, false},
		{"one ended", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.CreationTimestamp = metav1.NewTime(now)
		}, false, false},
		{"another controller's replacement under the PDB", func(p *v1.Pod) {
			p.Status.Conditions[0].Status = v1.ConditionFalse
			p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			pods := w.rs("serve", 3)
			w.pdb("serve", 1, 3, 3, "1", nil)
			changed := w.replica("serve", "serve-x", true)
			if tt.other {
				changed.OwnerReferences[0].Name, changed.OwnerReferences[0].UID = "serve-new", "rs-serve-new"
			}
			changed.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
			tt.pod(changed)
			w.put(changed)
			b, why := w.ledger.Of(pods[0])
			if why != "" {
				t.Fatal(why)
			}
			if got := w.ledger.Settling(b, now, window); got != tt.want {
				t.Errorf("Settling = %v, want %v", got, tt.want)
			}
		})
	}
}
