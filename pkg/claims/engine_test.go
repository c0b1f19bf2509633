// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// rig is a claim engine over informer stores the test fills by hand, a
// fake apiserver for evictions and claims, and a fake clock: each Sync is
// one look, deterministic.
type rig struct {
	t        testing.TB
	ctx      context.Context
	inf      informers.SharedInformerFactory
	dyn      *dynamicfake.FakeDynamicClient
	store    *Store
	engine   *Engine
	ledger   *disruption.Ledger
	clock    *testingclock.FakeClock
	recorder *events.FakeRecorder
	client   *fake.Clientset
	conds    *fakeConditions

	mu sync.Mutex
	// evictErr answers an eviction (nil: the pod goes).
	evictErr  func(pod string) error
	evictions []string
	deletions []string // pods deleted without the Eviction API
	// warmTimeout, when set, makes claims make-before-break with it.
	warmTimeout time.Duration
	// beforeEvict, when set, runs as each eviction reaches the apiserver.
	beforeEvict func()
	tries       int
	activated   []string
}

// rigEvents is how many Events a rig's recorder holds (it blocks when
// full): one a victim moved, for the largest claim tested.
const rigEvents = 60000

func newRig(t testing.TB) *rig {
	r := &rig{t: t, ctx: t.Context(), clock: testingclock.NewFakeClock(t0), recorder: events.NewFakeRecorder(rigEvents)}
	client := fake.NewClientset()
	r.client, r.conds = client, &fakeConditions{}
	r.inf = informers.NewSharedInformerFactory(client, 0)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		r.mu.Lock()
		r.tries++
		fail, before := r.evictErr, r.beforeEvict
		r.mu.Unlock()
		if before != nil {
			before()
		}
		if fail != nil {
			if err := fail(ev.Name); err != nil {
				return true, nil, err
			}
		}
		r.mu.Lock()
		r.evictions = append(r.evictions, ev.Name)
		r.mu.Unlock()
		r.gone(ev.Namespace, ev.Name)
		return true, ev, nil
	})
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		r.mu.Lock()
		r.deletions = append(r.deletions, d.GetName())
		r.mu.Unlock()
		r.gone(d.GetNamespace(), d.GetName())
		return true, nil, nil
	})
	scheme := runtime.NewScheme()
	r.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{v1alpha1.Resource: "ResearchClaimList"})
	r.store = &Store{dyn: r.dyn}
	inf := dynamicinformer.NewDynamicSharedInformerFactory(r.dyn, 0).ForResource(v1alpha1.Resource).Informer()
	if err := inf.SetTransform(toTyped); err != nil {
		t.Fatal(err)
	}
	r.store.informer.Store(&inf)
	r.store.served.Store(true)
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	r.ledger, err = disruption.NewLedger(r.inf, intstr.FromString("25%"), client, r.recorder)
	if err != nil {
		t.Fatal(err)
	}
	r.engine, err = NewEngine(Config{
		Client: client, Conditions: r.conds,
		Informers: r.inf, Store: r.store, Classes: classes,
		Ledger:   r.ledger,
		Recorder: r.recorder,
		Activate: func(_ context.Context, pods []*v1.Pod) {
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, p := range pods {
				r.activated = append(r.activated, p.Name)
			}
		},
		RetryBackoff: 30 * time.Second,
		Clock:        r.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two physical nodes and an overflow node with 64 GPUs of room.
	for _, n := range []string{"n0", "n1"} {
		r.put(node(n, false))
	}
	r.put(node("vk", true))
	return r
}

// heldPods counts the victims whose overflow room live claims hold.
func heldPods(s *Store) int {
	n := 0
	for _, r := range s.Reservations() {
		n += int(r.Requests.Pods)
	}
	return n
}

func node(name string, overflowNode bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	n.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}
	if overflowNode {
		n.Labels = map[string]string{"type": "virtual-kubelet"}
		n.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("64"), v1.ResourcePods: resource.MustParse("1000")}
	}
	return n
}

// put adds or replaces an object in its informer's store.
func (r *rig) put(obj runtime.Object) {
	r.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Node:
		err = r.inf.Core().V1().Nodes().Informer().GetStore().Update(o)
	case *v1.Pod:
		err = r.inf.Core().V1().Pods().Informer().GetStore().Update(o)
	case *appsv1.ReplicaSet:
		err = r.inf.Apps().V1().ReplicaSets().Informer().GetStore().Update(o)
	case *policyv1.PodDisruptionBudget:
		err = r.inf.Policy().V1().PodDisruptionBudgets().Informer().GetStore().Update(o)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// gone removes a pod from the pod store (it was evicted and has
// terminated).
func (r *rig) gone(ns, name string) {
	store := r.inf.Core().V1().Pods().Informer().GetStore()
	if obj, ok, _ := store.GetByKey(ns + "/" + name); ok {
		_ = store.Delete(obj)
	}
}

// rs adds a ReplicaSet of replicas serving pods, each on node with gpus,
// and returns the pods.
func (r *rig) rs(name string, replicas int, node string, gpus int) []*v1.Pod {
	r.put(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID("rs-" + name)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(replicas))}})
	var out []*v1.Pod
	for i := range replicas {
		p := r.replica(name, fmt.Sprintf("%s-%d", name, i), node, gpus)
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
		r.put(p)
		out = append(out, p)
	}
	return out
}

// replica is a Ready pod of ReplicaSet rs on node.
func (r *rig) replica(rs, name, node string, gpus int) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID(name), Labels: map[string]string{"app": rs},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("rs-" + rs), Controller: ptr.To(true)}},
		CreationTimestamp: metav1.NewTime(r.clock.Now())}}
	p.Spec.NodeName = node
	p.Spec.PriorityClassName = "production"
	p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(gpus))}}}}
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	return p
}

// replace adds the Ready replacement of an evicted pod of rs on node.
func (r *rig) replace(rs, name, node string) {
	r.put(r.replica(rs, name, node, 1))
}

func (r *rig) pdb(name, app string, maxUnavailable, expected, healthy int) {
	mu := intstr.FromInt32(int32(maxUnavailable))
	allowed := max(healthy-(expected-maxUnavailable), 0)
	r.put(&policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: int32(expected), DesiredHealthy: int32(expected - maxUnavailable),
			CurrentHealthy: int32(healthy), DisruptionsAllowed: int32(allowed)},
	})
}

// claimant is a pending research pod.
func (r *rig) claimant(name string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID(name)}}
	p.Spec.PriorityClassName = "research"
	r.put(p)
	return p
}

// claim records a claim for claimant on n0, moving victims (all from n0)
// to vk, and returns its key.
func (r *rig) claim(claimant *v1.Pod, victims []*v1.Pod) string {
	r.t.Helper()
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: NameOf("prod/" + claimant.Name), CreationTimestamp: metav1.NewTime(r.clock.Now())}}
	c.Spec = v1alpha1.ResearchClaimSpec{Key: "prod/" + claimant.Name, Domain: "n0", TimeoutSeconds: 600, ReplacementTimeoutSeconds: 300,
		Claimants:       []v1alpha1.Claimant{{Name: claimant.Name, UID: claimant.UID, Node: "n0"}},
		MakeBeforeBreak: r.warmTimeout > 0, WarmTimeoutSeconds: int64(r.warmTimeout / time.Second)}
	for _, v := range victims {
		b, why := r.ledger.Of(v)
		if why != "" {
			r.t.Fatalf("victim %s: %s", v.Name, why)
		}
		ref := metav1.GetControllerOf(v)
		c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{Namespace: v.Namespace, Name: v.Name, UID: v.UID, Node: v.Spec.NodeName,
			Owner: v1alpha1.Owner{Kind: ref.Kind, Name: ref.Name, UID: ref.UID}, Budget: b.Name, Target: v1alpha1.Target{Node: "vk"},
			Requests: v.Spec.Containers[0].Resources.Requests})
	}
	if _, err := r.store.CreateClaim(r.ctx, c); err != nil {
		r.t.Fatal(err)
	}
	r.refresh()
	return c.Namespace + "/" + c.Name
}

// refresh copies the fake apiserver's claims into the store (its informer
// does not run in these tests) and reindexes.
func (r *rig) refresh() {
	r.t.Helper()
	list, err := r.dyn.Resource(v1alpha1.Resource).Namespace(metav1.NamespaceAll).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	var items []any
	for i := range list.Items {
		obj, err := toTyped(&list.Items[i])
		if err != nil {
			r.t.Fatal(err)
		}
		items = append(items, obj)
	}
	if err := (*r.store.informer.Load()).GetStore().Replace(items, ""); err != nil {
		r.t.Fatal(err)
	}
	r.store.reindex()
}

// sync looks at a claim once at t0 + d.
func (r *rig) sync(key string, d time.Duration) {
	r.t.Helper()
	r.clock.SetTime(t0.Add(d))
	if err := r.engine.Sync(r.ctx, key); err != nil {
		r.t.Fatalf("sync: %v", err)
	}
	r.refresh()
}

func (r *rig) get(key string) (*v1alpha1.ResearchClaim, bool) {
	ns, name, _ := strings.Cut(key, "/")
	return r.store.Get(ns, name)
}

func (r *rig) evicted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.evictions...)
}

func (r *rig) deleted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.deletions...)
}

func (r *rig) events(reason string) []string {
	var out []string
	for {
		select {
		case e := <-r.recorder.Events:
			if strings.Contains(e, reason) {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

// warm sets a pod's WarmCondition, as its overflow node would.
func (r *rig) warm(p *v1.Pod, status v1.ConditionStatus, reason, msg string) {
	p = p.DeepCopy()
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: offer.WarmCondition, Status: status, Reason: reason, Message: msg})
	r.put(p)
}

// TestMakeBeforeBreak: a make-before-break claim evicts a victim only once
// its warm instance is Ready, budgets still pacing; a victim whose warm
// instance failed, or is not Ready within the warm timeout, moves without
// one, with an Event saying why.
func TestMakeBeforeBreak(t *testing.T) {
	r := newRig(t)
	r.warmTimeout = 120 * time.Second
	vk := node("vk", true)
	vk.Annotations = map[string]string{offer.Annotation: `{"providers":[{"name":"","healthy":true,"capacity":{"nvidia.com/gpu":"64"}}],"warm":true}`}
	r.put(vk)
	// 4 replicas without a PDB: the default budget (25%) allows 1.
	victims := r.rs("serve", 4, "n0", 2)
	key := r.claim(r.claimant("train"), victims)

	r.sync(key, 0)
	if got := r.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v before any warm instance was Ready", got)
	}
	c, _ := r.get(key)
	if c.Status.Phase != v1alpha1.PhasePaused || !strings.Contains(c.Status.Message, "warm instances not Ready yet on vk (4 pods") {
		t.Errorf("claim %s %q, want Paused waiting for 4 warm instances on vk", c.Status.Phase, c.Status.Message)
	}
	if ev := r.events(ReasonPaused); len(ev) != 1 || !strings.Contains(ev[0], "warm instances not Ready yet on vk") {
		t.Errorf("pause events %q, want one waiting for warm instances", ev)
	}

	r.warm(victims[1], v1.ConditionTrue, offer.WarmReady, "warm instance Ready")
	r.warm(victims[2], v1.ConditionTrue, offer.WarmReady, "warm instance Ready")
	r.sync(key, 10*time.Second)
	if diff := cmp.Diff([]string{"serve-1"}, r.evicted()); diff != "" {
		t.Errorf("evicted with two warm instances Ready and a budget of 1 (-want,+got):\n%s", diff)
	}
	r.replace("serve", "serve-new-1", "vk")
	r.warm(victims[3], v1.ConditionFalse, offer.WarmFailed, "no provider can run this pod as written")
	r.sync(key, 20*time.Second)
	r.replace("serve", "serve-new-2", "vk")
	r.sync(key, 30*time.Second)
	if diff := cmp.Diff([]string{"serve-1", "serve-2", "serve-3"}, r.evicted()); diff != "" {
		t.Errorf("evicted after the first replacement (-want,+got):\n%s", diff)
	}
	if ev := r.events(ReasonMovedCold); len(ev) != 1 || !strings.Contains(ev[0], "no provider can run this pod as written") {
		t.Errorf("cold-move events %q, want one for serve-3 naming its warm failure", ev)
	}
	r.replace("serve", "serve-new-3", "vk")
	// serve-0 never gets a warm instance: it waits until the warm timeout.
	r.sync(key, 119*time.Second)
	if n := len(r.evicted()); n != 3 {
		t.Errorf("%d evicted before the warm timeout, want 3", n)
	}
	r.sync(key, 120*time.Second)
	if n := len(r.evicted()); n != 4 {
		t.Fatalf("%d evicted at the warm timeout, want 4", n)
	}
	if ev := r.events(ReasonMovedCold); len(ev) != 1 || !strings.Contains(ev[0], "not Ready 2m0s after the claim began (the overflow node never reported one)") {
		t.Errorf("cold-move events %q, want one for serve-0 at the warm timeout", ev)
	}
}

// TestMakeBeforeBreakOnANodeThatDoesNotWarm: an overflow node whose offer
// does not say it warms (not sluice's, or one that cannot read claims)
// never reports warm instances; a make-before-break claim does not wait
// for them there.
func TestMakeBeforeBreakOnANodeThatDoesNotWarm(t *testing.T) {
	r := newRig(t)
	r.warmTimeout = 120 * time.Second
	key := r.claim(r.claimant("train"), r.rs("serve", 4, "n0", 2))
	r.sync(key, 0)
	if diff := cmp.Diff([]string{"serve-0"}, r.evicted()); diff != "" {
		t.Errorf("evicted (-want,+got):\n%s", diff)
	}
}

// TestEveryEvictionFailing: a claim all of whose evictions fail (a pod
// under two budgets answers 500, a budget the lister misreads answers 429)
// ends at its timeout: given up, the claimant told why in numbers and
// requeued, no new claim before the backoff, no eviction after.
func TestEveryEvictionFailing(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"500", apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))},
		{"429", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.evictErr = func(string) error { return tt.err }
			victims := r.rs("serve", 4, "n0", 2)
			key := r.claim(r.claimant("train"), victims)
			for d := time.Duration(0); d <= 600*time.Second; d += 30 * time.Second {
				r.sync(key, d)
			}
			c, _ := r.get(key)
			if c.Status.Phase == v1alpha1.PhaseGivenUp {
				t.Fatalf("given up at or before its 600 s timeout")
			}
			r.sync(key, 601*time.Second)
			c, _ = r.get(key)
			if c.Status.Phase != v1alpha1.PhaseGivenUp || c.Status.RetryAfter == nil || !c.Status.RetryAfter.Time.Equal(t0.Add(631*time.Second)) {
				t.Fatalf("after the timeout: phase %s, retry after %v; want GivenUp, retry at +631 s", c.Status.Phase, c.Status.RetryAfter)
			}
			given := r.events(ReasonGivenUp)
			if len(given) != 1 || !strings.Contains(given[0], "0 of 4 production pods moved") || !strings.Contains(given[0], "4 not evicted") {
				t.Errorf("given-up events %q, want one saying 0 of 4 moved, 4 not evicted", given)
			}
			if len(r.activated) != 1 {
				t.Errorf("claimant activated %d times, want once (its nomination goes)", len(r.activated))
			}
			tries := r.tries
			r.sync(key, 610*time.Second)
			if r.tries != tries {
				t.Errorf("%d evictions tried after the claim was given up", r.tries-tries)
			}
			// After the backoff the record goes, so a new plan may start.
			r.sync(key, 631*time.Second)
			if _, ok := r.get(key); ok {
				t.Errorf("the given-up claim outlived its backoff")
			}
		})
	}
}

// TestDefaultBudgetPaces: a Deployment without a PodDisruptionBudget loses
// at most the default 25% at once; the next go as replacements turn
// Ready.
func TestDefaultBudgetPaces(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	if got := len(r.evicted()); got != 2 {
		t.Fatalf("%d evicted in the first pass, want 2 (25%% of 8)", got)
	}
	r.sync(key, time.Second)
	if got := len(r.evicted()); got != 2 {
		t.Fatalf("%d evicted before any replacement was Ready, want 2", got)
	}
	r.replace("serve", "serve-new-0", "vk")
	r.sync(key, 2*time.Second)
	if got := len(r.evicted()); got != 3 {
		t.Fatalf("%d evicted after one replacement, want 3", got)
	}
	// A replacement on the node being freed serves (its budget counts
	// it), but does not replace a victim: its room stays held.
	r.replace("serve", "serve-new-1", "n0")
	r.sync(key, 3*time.Second)
	if c, _ := r.get(key); len(c.Status.Replaced) != 1 {
		t.Fatalf("%d victims replaced after a replacement landed on the claimed node, want 1", len(c.Status.Replaced))
	}
}

// TestReplacementsReadyOutOfOrder: replacements turn Ready in another
// order than their victims were evicted (one adopts a warm instance,
// another starts cold). A replacement is matched to the victim evicted
// last that it may replace, so the one created before a later victim's
// eviction is left for an earlier victim, and no victim holds its budget
// until the replacement timeout.
func TestReplacementsReadyOutOfOrder(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1) // default budget: 2 at once
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	r.clock.SetTime(t0.Add(time.Second))
	r.replace("serve", "serve-new-0", "vk")
	r.sync(key, 2*time.Second)
	if got := len(r.evicted()); got != 3 {
		t.Fatalf("%d evicted after one replacement, want 3", got)
	}
	// The second victim evicted at 0s gets its replacement at 1.5s, which
	// turns Ready only after the one created at 3s for the victim evicted
	// at 2s.
	r.clock.SetTime(t0.Add(1500 * time.Millisecond))
	slow := r.replica("serve", "serve-new-1", "vk", 1)
	slow.Status.Conditions[0].Status = v1.ConditionFalse
	r.put(slow)
	r.clock.SetTime(t0.Add(3 * time.Second))
	r.replace("serve", "serve-new-2", "vk")
	r.sync(key, 4*time.Second)
	slow = slow.DeepCopy()
	slow.Status.Conditions[0].Status = v1.ConditionTrue
	r.put(slow)
	r.sync(key, 5*time.Second)
	c, _ := r.get(key)
	if len(c.Status.Replaced) != 3 {
		t.Errorf("%d of the 3 evicted victims replaced with every replacement Ready, want 3", len(c.Status.Replaced))
	}
	if got := len(r.evicted()); got != 5 {
		t.Errorf("%d evicted once the three replacements were Ready, want 5 (the budget's 2 given back)", got)
	}
}

// TestOwnReplacementsOnly: a crash-looping replica of the same ReplicaSet
// beside the victims does not hold the claim back: a wave waits for the
// victims' own replacements, not for the whole ReplicaSet.
func TestOwnReplacementsOnly(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1)
	crashing := r.replica("serve", "serve-crashing", "n1", 1)
	crashing.Status.Conditions[0].Status = v1.ConditionFalse
	r.put(crashing)
	r.pdb("serve", "serve", 2, 5, 4)
	key := r.claim(r.claimant("train"), victims)
	for i, d := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second} {
		r.sync(key, d)
		// Each eviction spends the PDB; its replacement gives it back.
		evicted := r.evicted()
		if len(evicted) > i+1 {
			t.Fatalf("%d evicted after %d passes", len(evicted), i+1)
		}
		r.pdb("serve", "serve", 2, 5, 4)
		for j := range evicted {
			r.replace("serve", fmt.Sprintf("serve-new-%d", j), "vk")
		}
	}
	r.sync(key, 4*time.Second)
	c, _ := r.get(key)
	if got := len(r.evicted()); got != 4 || c.Status.Phase != v1alpha1.PhaseFreed {
		t.Fatalf("%d of 4 evicted, phase %s; want all moved and the claim Freed", got, c.Status.Phase)
	}
}

// TestPausedWhileOverflowNotReady: before each pass the overflow node is
// read again; NotReady pauses the claim (no eviction) until it recovers.
func TestPausedWhileOverflowNotReady(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	first := len(r.evicted())
	down := node("vk", true)
	down.Status.Conditions[0].Status = v1.ConditionFalse
	r.put(down)
	for j := range first {
		r.replace("serve", fmt.Sprintf("serve-new-%d", j), "vk")
	}
	r.sync(key, time.Second)
	c, _ := r.get(key)
	if len(r.evicted()) != first || c.Status.Phase != v1alpha1.PhasePaused || !strings.Contains(c.Status.Message, "vk is not Ready") {
		t.Fatalf("overflow NotReady: %d evicted (before: %d), phase %s %q; want no eviction, Paused naming vk", len(r.evicted()), first, c.Status.Phase, c.Status.Message)
	}
	if len(r.events(ReasonPaused)) != 1 {
		t.Errorf("want one %s event", ReasonPaused)
	}
	r.put(node("vk", true))
	r.sync(key, 2*time.Second)
	if len(r.evicted()) == first {
		t.Fatalf("no eviction after the overflow node recovered")
	}
}

// TestPauseCauseChangeIsTold: a claim already paused on a budget whose
// overflow node then goes NotReady says so in a second ClaimPaused Event
// (a pass with the same cause says nothing new). Their actions differ: the
// events library folds Events of one reason and action on one object into
// a series that keeps the first note.
func TestPauseCauseChangeIsTold(t *testing.T) {
	r := newRig(t)
	r.recorder.Verbose = true // the action too
	victims := r.rs("serve", 4, "n0", 1)
	r.pdb("serve", "serve", 1, 4, 4)
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	r.pdb("serve", "serve", 1, 4, 3) // the first eviction spent the budget
	r.sync(key, time.Second)
	r.sync(key, 2*time.Second)
	if got := r.events(ReasonPaused); len(got) != 1 || !strings.Contains(got[0], ActionWaitBudget+" ") || !strings.Contains(got[0], "PodDisruptionBudget serve") {
		t.Fatalf("paused on the budget: %s events %q, want one (%s) naming PodDisruptionBudget serve", ReasonPaused, got, ActionWaitBudget)
	}
	down := node("vk", true)
	down.Status.Conditions[0].Status = v1.ConditionFalse
	r.put(down)
	r.replace("serve", "serve-new-0", "vk")
	r.pdb("serve", "serve", 1, 4, 4)
	r.sync(key, 3*time.Second)
	got := r.events(ReasonPaused) // (events drains: only the new ones)
	if len(got) != 1 || !strings.Contains(got[0], ActionWaitOverflow+" ") || !strings.Contains(got[0], "vk is not Ready") {
		t.Fatalf("paused on the budget, then the overflow node NotReady: new %s events %q, want one (%s) naming vk", ReasonPaused, got, ActionWaitOverflow)
	}
}

// TestOverflowFullPauses: a provider whose capacity shrank below what is
// counted on it pauses the claim too.
func TestOverflowFullPauses(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	full := node("vk", true)
	raw, _ := offer.Offer{Providers: []offer.Provider{{Name: "p0", Healthy: true, Capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}.Encode()
	full.Annotations = map[string]string{offer.Annotation: raw}
	r.put(full)
	r.sync(key, 0)
	c, _ := r.get(key)
	if len(r.evicted()) != 0 || c.Status.Phase != v1alpha1.PhasePaused {
		t.Fatalf("%d evicted into a full overflow node, phase %s", len(r.evicted()), c.Status.Phase)
	}
}

// TestResumeCountsTerminating: a victim evicted by a leader that died
// before writing the status is terminating: the new leader counts it in
// flight (budget and room), evicting no more than the budget allows.
func TestResumeCountsTerminating(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1) // default budget: 2 at once
	key := r.claim(r.claimant("train"), victims)
	for _, v := range victims[:2] {
		p := v.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: t0.Add(30 * time.Second)}
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		r.put(p)
	}
	r.sync(key, time.Second)
	if got := r.evicted(); len(got) != 0 {
		t.Fatalf("new leader evicted %v with 2 victims still terminating and a budget of 2", got)
	}
	c, _ := r.get(key)
	if len(c.Status.Evicted) != 2 {
		t.Fatalf("status records %d evictions, want the 2 terminating victims", len(c.Status.Evicted))
	}
	if got := heldPods(r.store); got != 8 {
		t.Errorf("%d reservations, want all 8 victims' room held", got)
	}
}

// TestFinishesCutOffEviction: a leader killed inside an eviction leaves
// the apiserver's half of it done: the budget spent on the pod (listed
// among the PDB's disruptedPods) and the pod not deleted. The Eviction API
// refuses the pod again (the budget allows no more) until the disruption
// controller drops the record two minutes later. The claim recorded the
// eviction in its status before issuing it, so the next leader finishes it
// at once by deleting the pod the budget already counts as gone, and
// evicts nothing the budget does not allow. The same PDB record with no
// eviction of the claim's recorded (someone else's, or a name reused) is
// never acted on: no pod is deleted behind the Eviction API.
func TestFinishesCutOffEviction(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded=%v", recorded), func(t *testing.T) {
			r := newRig(t)
			victims := r.rs("serve", 4, "n0", 2)
			r.pdb("serve", "serve", 1, 4, 4)
			pdb, err := r.inf.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets("prod").Get("serve")
			if err != nil {
				t.Fatal(err)
			}
			cut := pdb.DeepCopy()
			cut.Status.DisruptionsAllowed, cut.Status.CurrentHealthy = 0, 3
			cut.Status.DisruptedPods = map[string]metav1.Time{victims[0].Name: metav1.NewTime(t0.Add(-time.Second))}
			r.put(cut)
			r.evictErr = func(string) error { return apierrors.NewTooManyRequests("budget", 1) }
			key := r.claim(r.claimant("train"), victims)
			if recorded {
				c, _ := r.get(key)
				c = c.DeepCopy()
				c.Status.Evicting = []types.UID{victims[0].UID}
				if _, err := r.store.UpdateStatus(r.ctx, c); err != nil {
					t.Fatal(err)
				}
				r.refresh()
			}
			r.sync(key, 0)
			if got := r.evicted(); len(got) != 0 {
				t.Fatalf("evicted %v with a budget that allows none", got)
			}
			c, _ := r.get(key)
			if !recorded {
				if got := r.deleted(); len(got) != 0 {
					t.Fatalf("deleted %v on a disruptedPods record the claim never wrote", got)
				}
				return
			}
			if got := r.deleted(); len(got) != 1 || got[0] != victims[0].Name {
				t.Fatalf("deleted %v, want only %s, whose eviction the claim recorded and the budget counts", got, victims[0].Name)
			}
			if len(c.Status.Evicted) != 1 || len(c.Status.Evicting) != 0 {
				t.Fatalf("status records %d evictions and %d issued, want 1 and 0", len(c.Status.Evicted), len(c.Status.Evicting))
			}
		})
	}
}

// TestEvictionsRecordedFirst: the victims a pass evicts are written to
// the claim's status before the Eviction API is called, so a leader killed
// after its evictions and before its last status write leaves them
// recorded: the next leader counts the victims that have gone since as
// evicted (their overflow room held for their replacements), not as gone
// on their own.
func TestEvictionsRecordedFirst(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1) // default budget: 2 at once
	key := r.claim(r.claimant("train"), victims)
	var seen []types.UID
	r.beforeEvict = func() {
		c, _ := r.get(key)
		seen = append([]types.UID(nil), c.Status.Evicting...)
	}
	r.sync(key, 0)
	if len(seen) != 2 {
		t.Fatalf("the status recorded %v when the first eviction was issued, want the 2 victims of the pass", seen)
	}
	// A new leader reads the status as the killed one wrote it before
	// evicting: both victims gone since.
	c, _ := r.get(key)
	c = c.DeepCopy()
	c.Status.Evicted, c.Status.Evicting = nil, seen
	if _, err := r.store.UpdateStatus(r.ctx, c); err != nil {
		t.Fatal(err)
	}
	r.refresh()
	r.sync(key, time.Second)
	c, _ = r.get(key)
	if len(c.Status.Evicted) != 2 || len(c.Status.Replaced) != 0 {
		t.Fatalf("new leader: %d evicted, %d replaced; want the 2 gone victims evicted, none replaced", len(c.Status.Evicted), len(c.Status.Replaced))
	}
	if got := heldPods(r.store); got != 8 {
		t.Errorf("%d reservations, want all 8 victims' room held", got)
	}
}

// TestRoomHeldUntilReplacementsPlaced: a claim whose research pods are
// bound keeps the overflow room of its evicted victims until their
// replacements are placed: a replacement still Pending is about to take
// it. One bound on the overflow node (even still starting) counts there
// and gives the victim's reservation back, so it is never counted twice.
func TestRoomHeldUntilReplacementsPlaced(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	claimant := r.claimant("train")
	key := r.claim(claimant, victims)
	r.sync(key, 0)
	if got := len(r.evicted()); got != 2 {
		t.Fatalf("%d evicted, want 2", got)
	}
	bound := claimant.DeepCopy()
	bound.Spec.NodeName = "n0"
	r.put(bound)
	pending := r.replica("serve", "serve-new-0", "", 1)
	pending.Status.Phase, pending.Status.Conditions = v1.PodPending, nil
	r.put(pending)
	r.sync(key, time.Second)
	if _, ok := r.get(key); !ok {
		t.Fatal("the claim ended with its research pods bound and 2 replacements not placed: their overflow room went with it")
	}
	if got := heldPods(r.store); got != 2 {
		t.Fatalf("%d reservations with 2 replacements not placed, want 2 (the victims not evicted hold nothing now)", got)
	}
	starting := pending.DeepCopy()
	starting.Spec.NodeName = "vk"
	r.put(starting)
	r.sync(key, 2*time.Second)
	if got := heldPods(r.store); got != 1 {
		t.Fatalf("%d reservations with one replacement bound to vk (still starting), want 1: it counts on vk itself", got)
	}
	r.put(r.replica("serve", "serve-new-1", "vk", 1))
	r.sync(key, 3*time.Second)
	if _, ok := r.get(key); ok {
		t.Fatal("the claim outlived its research pods bound and every replacement placed")
	}
	if got := len(r.evicted()); got != 2 {
		t.Errorf("%d evicted, want 2: nothing more once the research pods are bound", got)
	}
}

// TestReplacementsMatchedByTheAPIServersClock: the scheduler's clock runs
// 10 s ahead of the apiserver's. A replacement the apiserver created 5 s
// after the victim's eviction (by its own clock) still counts: what is a
// replacement is decided on the apiserver's times alone (the claim's and
// the pod's creation).
func TestReplacementsMatchedByTheAPIServersClock(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	key := r.claim(r.claimant("train"), victims) // created at t0 by the apiserver
	r.sync(key, 10*time.Second)                  // the scheduler says t0+10s; the apiserver t0
	r.clock.SetTime(t0.Add(5 * time.Second))
	r.replace("serve", "serve-new-0", "vk") // created at apiserver t0+5s
	r.sync(key, 20*time.Second)
	c, _ := r.get(key)
	if len(c.Status.Replaced) != 1 {
		t.Fatalf("%d victims replaced, want 1: the replacement came after the claim, by the apiserver's clock", len(c.Status.Replaced))
	}
}

// TestClaimEnds: a claim whose claimants are all bound, or gone, is
// deleted once its evicted victims' replacements are placed.
func TestClaimEnds(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 1, "n0", 8)
	claimant := r.claimant("train")
	key := r.claim(claimant, victims)
	r.sync(key, 0)
	bound := claimant.DeepCopy()
	bound.Spec.NodeName = "n0"
	r.put(bound)
	r.replace("serve", "serve-new", "vk")
	r.sync(key, time.Second)
	if _, ok := r.get(key); ok {
		t.Fatal("the claim outlived its bound claimant and its victim's replacement placed")
	}
	r2 := newRig(t)
	key = r2.claim(r2.claimant("gone"), r2.rs("serve", 1, "n0", 8))
	r2.gone("prod", "gone")
	r2.sync(key, 0)
	if _, ok := r2.get(key); ok {
		t.Fatal("the claim outlived its deleted claimant")
	}
}

// TestReplacementTimeout: an evicted victim whose replacement is never
// placed stops holding its overflow room after replacementTimeoutSeconds,
// with an Event. Its budget stays spent (a replica is down) until a
// replacement is Ready: the ledger counts pods, not timers.
func TestReplacementTimeout(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1) // default budget: 1 at once
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	r.sync(key, 300*time.Second)
	if len(r.evicted()) != 1 || heldPods(r.store) != 4 {
		t.Fatalf("%d evicted, %d reservations within the replacement timeout, want 1 and 4", len(r.evicted()), heldPods(r.store))
	}
	r.sync(key, 301*time.Second)
	if heldPods(r.store) != 3 {
		t.Fatalf("%d reservations after the replacement timed out, want 3", heldPods(r.store))
	}
	if len(r.evicted()) != 1 {
		t.Fatalf("%d evicted after the replacement timed out with its budget still spent, want 1", len(r.evicted()))
	}
	if len(r.events(ReasonReplacementTimeout)) != 1 {
		t.Errorf("want one %s event", ReasonReplacementTimeout)
	}
}

// TestStoreIndex: live claims hold their nodes and their room; given-up
// ones hold nothing.
func TestStoreIndex(t *testing.T) {
	r := newRig(t)
	key := r.claim(r.claimant("train"), r.rs("serve", 2, "n0", 4))
	if !r.store.NodeClaimed("n0") || r.store.NodeClaimed("n1") || heldPods(r.store) != 2 {
		t.Fatalf("live claim: n0 claimed %v, n1 %v, %d reservations", r.store.NodeClaimed("n0"), r.store.NodeClaimed("n1"), heldPods(r.store))
	}
	c, _ := r.get(key)
	c = c.DeepCopy()
	c.Status.Phase = v1alpha1.PhaseGivenUp
	if _, err := r.store.UpdateStatus(r.ctx, c); err != nil {
		t.Fatal(err)
	}
	r.refresh()
	if r.store.NodeClaimed("n0") || heldPods(r.store) != 0 {
		t.Fatal("a given-up claim still holds its node or room")
	}
}

// TestUnreadableClaimHoldsNothing: a claim object sluice cannot decode is
// read as given up, not as a panic.
func TestUnreadableClaimHoldsNothing(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "claims.sluice.dev/v1alpha1", "kind": "ResearchClaim",
		"metadata": map[string]any{"name": "bad", "namespace": "prod"}, "spec": map[string]any{"victims": "not a list"}}}
	obj, err := toTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	c := obj.(*v1alpha1.ResearchClaim)
	if Live(c) || !strings.Contains(c.Status.Message, "cannot be read") {
		t.Fatalf("unreadable claim: phase %s %q", c.Status.Phase, c.Status.Message)
	}
}

// fakeConditions records the PodGroup conditions the engine asks for.
type fakeConditions struct {
	mu  sync.Mutex
	set []string
}

func (f *fakeConditions) SetCondition(key gang.Key, cond metav1.Condition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = append(f.set, fmt.Sprintf("%s %s %s %s: %s", key, cond.Type, cond.Status, cond.Reason, cond.Message))
}

func (f *fakeConditions) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.set...)
}

// TestProgressCondition: each step of a claim is written as a condition
// where its users look, in numbers and naming the budget that holds the
// rest: on the research pod when it is alone, on the PodGroup when the
// claim is a gang's; False once the room is free.
func TestProgressCondition(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1)
	r.pdb("serve-pdb", "serve", 1, 4, 4)
	train := r.claimant("train")
	if _, err := r.client.CoreV1().Pods(train.Namespace).Create(r.ctx, train, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := r.claim(train, victims)
	condition := func() v1.PodCondition {
		p, err := r.client.CoreV1().Pods(train.Namespace).Get(r.ctx, train.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == ConditionType {
				return c
			}
		}
		return v1.PodCondition{}
	}
	r.sync(key, 0)
	c := condition()
	if c.Status != v1.ConditionTrue || c.Reason != "Evicting" || !strings.Contains(c.Message, "0 of 4 production pods moved, 1 moving, 3 to go") ||
		!strings.Contains(c.Message, "serve-pdb") {
		t.Errorf("after the first wave: %s %s %q, want True Evicting, 0 of 4 moved, 1 moving, 3 to go, held by serve-pdb", c.Status, c.Reason, c.Message)
	}
	first := c.LastTransitionTime
	for i := range victims {
		r.replace("serve", fmt.Sprintf("serve-new-%d", i), "vk")
		r.sync(key, time.Duration(i+1)*time.Second)
	}
	c = condition()
	if c.Status != v1.ConditionFalse || c.Reason != "Freed" || !strings.Contains(c.Message, "4 production pods moved") {
		t.Errorf("after every victim moved: %s %s %q, want False Freed, 4 moved", c.Status, c.Reason, c.Message)
	}
	if !c.LastTransitionTime.After(first.Time) {
		t.Errorf("the condition's transition time did not move when it turned False")
	}
	if got := r.conds.all(); len(got) != 0 {
		t.Errorf("a lone pod's claim wrote PodGroup conditions: %v", got)
	}

	// A gang's claim: the PodGroup carries it.
	r2 := newRig(t)
	victims = r2.rs("serve", 2, "n0", 1)
	gangKey := r2.claim(r2.claimant("worker-0"), victims)
	ns, name, _ := strings.Cut(gangKey, "/")
	stored, _ := r2.store.Get(ns, name)
	owned := stored.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "PodGroup", Name: "train", UID: "pg"}}
	if err := (*r2.store.informer.Load()).GetStore().Update(owned); err != nil {
		t.Fatal(err)
	}
	r2.clock.SetTime(t0)
	if err := r2.engine.Sync(r2.ctx, gangKey); err != nil {
		t.Fatal(err)
	}
	got := r2.conds.all()
	if len(got) != 1 || !strings.HasPrefix(got[0], "prod/train (scheduling.x-k8s.io/v1alpha1) sluice.dev/ResearchClaim True Evicting: 0 of 2 production pods moved, 1 moving, 1 to go") {
		t.Errorf("PodGroup conditions = %q, want one: True Evicting, 0 of 2 moved, 1 moving, 1 to go", got)
	}
}

// TestClaimsShareADefaultBudget: two claims whose victims are pods of one
// ReplicaSet without a PodDisruptionBudget (8 replicas: the default 25%
// lets 2 be down at once) take at most 2 down between them, whatever
// claim syncs first.
func TestClaimsShareADefaultBudget(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	a := r.claim(r.claimant("train-a"), victims[:4])
	b := r.claim(r.claimant("train-b"), victims[4:])
	r.sync(a, 0)
	r.sync(b, 0)
	r.sync(a, time.Second)
	if got := r.evicted(); len(got) != 2 {
		t.Fatalf("two claims evicted %v before any replacement was Ready, want 2 (25%% of 8, one budget)", got)
	}
}

// TestNewLeaderCountsVictimsAlreadyGone: the old leader evicted two
// victims and was killed before it wrote the claim's status; by the time
// the new leader looks, both have finished terminating and their
// replacements are not Ready yet. Their budget is still spent: the new
// leader evicts nothing more until a replacement is Ready.
func TestNewLeaderCountsVictimsAlreadyGone(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1) // default budget: 2 at once
	key := r.claim(r.claimant("train"), victims)
	r.gone("prod", victims[0].Name)
	r.gone("prod", victims[1].Name)
	r.sync(key, time.Second)
	if got := r.evicted(); len(got) != 0 {
		t.Fatalf("new leader evicted %v with 2 of 8 replicas already down and a budget of 2", got)
	}
	r.replace("serve", "serve-new-0", "vk")
	r.sync(key, 2*time.Second)
	if got := r.evicted(); len(got) != 1 {
		t.Fatalf("evicted %v once one replacement was Ready, want 1", got)
	}
}

// TestStartingReplacementCountedOnce: a replacement bound to the overflow
// node but not Ready yet counts there (its node's pods), so its victim's
// reservation goes: the room is never counted twice.
func TestStartingReplacementCountedOnce(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 8, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	starting := r.replica("serve", "serve-new-0", "vk", 1)
	starting.Status.Conditions[0].Status = v1.ConditionFalse
	r.put(starting)
	r.sync(key, time.Second)
	if got := heldPods(r.store); got != 7 {
		t.Fatalf("%d reservations with one replacement bound to vk (still starting), want 7: it counts on vk itself", got)
	}
}

// TestEventNotesBounded: a claim blocked by 40 PodDisruptionBudgets, each
// allowing nothing now, says so in its Events within the events API's
// 1,024-byte note limit (a longer note is refused, and the Event lost),
// naming a few budgets and counting the rest.
func TestEventNotesBounded(t *testing.T) {
	r := newRig(t)
	var victims []*v1.Pod
	for i := range 40 {
		name := fmt.Sprintf("serving-model-with-a-long-name-%02d", i)
		victims = append(victims, r.rs(name, 4, "n0", 1)[0])
		r.pdb(name, name, 1, 4, 3)
	}
	key := r.claim(r.claimant("train"), victims)
	r.sync(key, 0)
	r.sync(key, 601*time.Second)
	all := r.events("")
	for _, reason := range []string{ReasonPaused, ReasonGivenUp} {
		var got []string
		for _, e := range all {
			if strings.Contains(e, " "+reason+" ") {
				got = append(got, e)
			}
		}
		if len(got) == 0 {
			t.Fatalf("no %s Event", reason)
		}
		for _, e := range got {
			if len(e) > 1024 {
				t.Errorf("%s Event of %d bytes, over the events API's 1,024: %.200s...", reason, len(e), e)
			}
			if !strings.Contains(e, "more") {
				t.Errorf("%s Event does not count the budgets it leaves out: %s", reason, e)
			}
		}
	}
}

// TestEventsSyncOnlyTheClaimsThatReadThem: a pod, budget or node event
// syncs the claims whose sync reads it (their claimants, victims, the
// victims' controllers, budgets and overflow nodes), not every claim.
func TestEventsSyncOnlyTheClaimsThatReadThem(t *testing.T) {
	r := newRig(t)
	a := r.claim(r.claimant("train-a"), r.rs("serve", 2, "n0", 1))
	b := r.claim(r.claimant("train-b"), r.rs("chat", 2, "n1", 1))
	other := r.replica("other", "other-0", "n1", 1)
	for _, tt := range []struct {
		name string
		obj  any
		want []string
	}{
		{"a victim", r.replica("serve", "serve-0", "n0", 1), []string{a}},
		{"a replacement of a victim's controller", r.replica("chat", "chat-new", "vk", 1), []string{b}},
		{"a claimant", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "train-a", UID: "train-a"}}, []string{a}},
		{"a pod no claim reads", other, nil},
		{"the overflow node both count on", node("vk", true), []string{a, b}},
		{"a physical node", node("n1", false), nil},
		{"a budget no claim uses", &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "other"}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := r.store.Watching(watchKeys(tt.obj)...)
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("claims synced (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOptOutAfterPlanningIsHonoured: a victim annotated
// sluice.dev/overflow: never after its claim was planned is not evicted:
// the claim drops it (its room released), says so in an Event on it, and
// moves the others.
func TestOptOutAfterPlanningIsHonoured(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	stay := victims[0].DeepCopy()
	stay.Annotations = map[string]string{overflow.Annotation: "Never"}
	r.put(stay)
	for i := range 4 {
		r.sync(key, time.Duration(i)*time.Second)
		for _, name := range r.evicted() {
			if name == stay.Name {
				t.Fatalf("%s evicted after it opted out of overflow", stay.Name)
			}
		}
		for j, name := range r.evicted() {
			r.replace("serve", fmt.Sprintf("new-%d-%d-%s", i, j, name), "vk")
		}
	}
	c, _ := r.get(key)
	if !slices.Contains(c.Status.Replaced, stay.UID) {
		t.Errorf("the opted-out victim still holds its room: replaced %v", c.Status.Replaced)
	}
	if got := r.events(ReasonDropped); len(got) != 1 || !strings.Contains(got[0], "opted out") {
		t.Errorf("%s Events %v, want one saying why", ReasonDropped, got)
	}
}

// TestBlockersNameOnlyTheViewersPods: what a claim says goes to its
// research namespace: reasons and victims of that namespace are named,
// those of other namespaces only counted, their budgets never named.
func TestBlockersNameOnlyTheViewersPods(t *testing.T) {
	b := blockers{}
	victim := func(ns, name string) v1alpha1.Victim {
		return v1alpha1.Victim{Namespace: ns, Name: name, Budget: "pdb/" + name}
	}
	b.add("PodDisruptionBudget secret-budget allows no more now", "waiting for a disruption budget of another namespace", victim("team-b", "secret-pod"))
	b.add("PodDisruptionBudget own-budget allows no more now", "waiting for a disruption budget of another namespace", victim("research", "own-pod"))
	got := b.String("research")
	for _, want := range []string{"own-budget", "own-pod", "waiting for a disruption budget of another namespace (1 pods: 1 of other namespaces)"} {
		if !strings.Contains(got, want) {
			t.Errorf("said %q, want it to contain %q", got, want)
		}
	}
	for _, secret := range []string{"team-b", "secret"} {
		if strings.Contains(got, secret) {
			t.Errorf("said %q to namespace research, which names %q of another namespace", got, secret)
		}
	}
}

// TestVictimOutsideTheTenancyPolicyIsDropped: a victim whose namespace
// left the production namespaces after its claim was planned is not
// evicted; its Event names the setting. One moved off its node meanwhile
// is not evicted either.
func TestVictimOutsideTheTenancyPolicyIsDropped(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 2, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	classes := r.engine.cfg.Classes
	classes.ProductionNamespaces = labels.SelectorFromSet(labels.Set{overflow.ProductionNamespaceLabel: "true"})
	classes.Namespace = func(string) (labels.Set, bool) { return labels.Set{}, true }
	r.sync(key, 0)
	if got := r.evicted(); len(got) != 0 {
		t.Fatalf("evicted %v from a namespace that is no longer production's", got)
	}
	got := r.events(ReasonDropped)
	if len(got) != 2 || !strings.Contains(got[0], overflow.ProductionNamespacesSetting) {
		t.Errorf("%s Events %v, want one per victim naming %s", ReasonDropped, got, overflow.ProductionNamespacesSetting)
	}
}

// TestClaimantOutsideTheTenancyPolicyEvictsNothingMore: a claim whose
// research namespace leaves the research namespaces mid-claim evicts
// nothing more (its claimants are gone for it); one whose namespace is not
// known yet (a new leader's cache) goes on.
func TestClaimantOutsideTheTenancyPolicyEvictsNothingMore(t *testing.T) {
	r := newRig(t)
	victims := r.rs("serve", 4, "n0", 1)
	key := r.claim(r.claimant("train"), victims)
	classes := r.engine.cfg.Classes
	classes.ResearchNamespaces = labels.SelectorFromSet(labels.Set{overflow.ResearchNamespaceLabel: "true"})
	known := false
	classes.Namespace = func(string) (labels.Set, bool) { return labels.Set{}, known }
	r.sync(key, 0)
	first := len(r.evicted())
	if first == 0 {
		t.Fatalf("nothing evicted while the claimant's namespace is not known yet")
	}
	known = true // known now, and outside the research namespaces
	for i := 1; i < 4; i++ {
		for j, name := range r.evicted() {
			r.replace("serve", fmt.Sprintf("new-%d-%d-%s", i, j, name), "vk")
		}
		r.sync(key, time.Duration(i)*time.Second)
	}
	if got := len(r.evicted()); got != first {
		t.Errorf("%d evicted after the claimant's namespace left the research namespaces, want %d (no more)", got, first)
	}
}
