// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package returns

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// world is a physical node n0 (8 GPUs), an overflow node vk running one
// production pod of 8 GPUs (a ReplicaSet's), a fake apiserver that takes
// evictions, and the default profile's filters as the fit check.
type world struct {
	t         *testing.T
	informers informers.SharedInformerFactory
	rc        *Controller
	clock     *testingclock.FakeClock
	claimed   map[string]bool
	recorder  *events.FakeRecorder
	mu        sync.Mutex
	evicted   []string
	client    *fake.Clientset
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newWorld(t *testing.T) *world {
	ctx := t.Context()
	w := &world{t: t, clock: testingclock.NewFakeClock(t0), claimed: map[string]bool{}, recorder: events.NewFakeRecorder(100)}
	client := fake.NewClientset()
	w.client = client
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
	fit := defaultFit(t, ctx, client, w.informers)
	ledger, err := disruption.NewLedger(w.informers, intstr.FromString("25%"), client, w.recorder)
	if err != nil {
		t.Fatal(err)
	}
	w.rc = New(Config{
		Return:  &config.ReturnConfig{Enabled: true, HysteresisSeconds: 60, MaxPodsPerWave: 10, PollIntervalSeconds: 1, WaveTimeoutSeconds: 300},
		Classes: classes, Informers: w.informers,
		Ledger:   ledger,
		Claimed:  func(n string) bool { return w.claimed[n] },
		FitFor:   func(string) (*Fit, bool) { return fit, true },
		Recorder: w.recorder,
		Clock:    w.clock,
	})
	gpu8 := map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
	n0 := st.MakeNode().Name("n0").Label("kubernetes.io/hostname", "n0").Capacity(gpu8).Obj()
	vk := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(gpu8).Obj()
	for _, n := range []*v1.Node{n0, vk} {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		w.store(n)
	}
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "rs-serve"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1)}})
	w.store(w.serving("serve", "vk", 8))
	return w
}

func TestMain(m *testing.M) {
	// kube-scheduler registers its metrics before building frameworks.
	schedmetrics.Register()
	os.Exit(m.Run())
}

// defaultFit is the fit check of kube-scheduler's default profile.
func defaultFit(t *testing.T, ctx context.Context, client *fake.Clientset, inf informers.SharedInformerFactory) *Fit {
	t.Helper()
	cfg, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	profile := cfg.Profiles[0]
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), &profile,
		frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(inf),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewEmptySnapshot()),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(0)))
	if err != nil {
		t.Fatal(err)
	}
	fit, err := NewFit(ctx, fw, profile.PluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	return fit
}

// serving is a Ready production pod of ReplicaSet serve on node.
func (w *world) serving(name, node string, gpus int) *v1.Pod {
	p := st.MakePod().Namespace("prod").Name(name).UID(name).Node(node).Label("app", "serve").
		OwnerReference("serve", appsv1.SchemeGroupVersion.WithKind("ReplicaSet")).
		Req(map[v1.ResourceName]string{"nvidia.com/gpu": itoa(gpus)}).Toleration("virtual-kubelet.io/provider").Obj()
	p.OwnerReferences[0].UID = "rs-serve"
	p.OwnerReferences[0].Controller = ptr.To(true)
	p.Spec.PriorityClassName = "production"
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	return p
}

func itoa(n int) string { return string(rune('0' + n)) }

func (w *world) store(obj runtime.Object) {
	w.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Node:
		err = w.informers.Core().V1().Nodes().Informer().GetStore().Update(o)
	case *v1.Pod:
		err = w.informers.Core().V1().Pods().Informer().GetStore().Update(o)
	case *appsv1.ReplicaSet:
		err = w.informers.Apps().V1().ReplicaSets().Informer().GetStore().Update(o)
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

// at ticks the controller at t0 + d.
func (w *world) at(d time.Duration) {
	w.clock.SetTime(t0.Add(d))
	w.rc.Tick(w.t.Context())
}

// TestHysteresis: production moves back only once physical room for it
// has stayed free for the whole window; room that is taken again resets
// the window.
func TestHysteresis(t *testing.T) {
	w := newWorld(t)
	w.store(filler())
	w.at(0) // no room
	w.remove(filler())
	w.at(10 * time.Second) // room: the window starts at 10 s
	w.at(69 * time.Second) // 59 s of room
	if w.moves() != 0 {
		t.Fatalf("moved after %s of room, before the 60 s window", 59*time.Second)
	}
	// Taken again at 69 s, free again at 80 s: the window starts over.
	w.store(filler())
	w.at(70 * time.Second)
	w.remove(filler())
	w.at(80 * time.Second)
	w.at(139 * time.Second)
	if w.moves() != 0 {
		t.Fatal("flapping room moved production back")
	}
	w.at(140 * time.Second) // 60 s of room since 80 s
	if w.moves() != 1 {
		t.Fatalf("%d moves after a full window of room, want 1", w.moves())
	}
	// Each window that started says so, and the one cut short too.
	counts := map[string]int{}
	for len(w.recorder.Events) > 0 {
		e := <-w.recorder.Events
		for _, r := range []string{ReasonPlanned, ReasonDeferred} {
			if strings.Contains(e, r) {
				counts[r]++
			}
		}
	}
	if counts[ReasonPlanned] != 2 || counts[ReasonDeferred] != 1 {
		t.Errorf("events %v, want 2 %s and 1 %s", counts, ReasonPlanned, ReasonDeferred)
	}
}

// TestResearchTakesOnlyWhatItCanUse: a waiting research pod that fits the
// free node keeps production away from it, and so does a claim on the
// node; research that can never run, or a claim elsewhere, does not hold
// returns back.
func TestResearchTakesOnlyWhatItCanUse(t *testing.T) {
	research := func(name string, gpus string, selector map[string]string) *v1.Pod {
		p := st.MakePod().Namespace("research").Name(name).UID(name).NodeSelector(selector).
			Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
		p.Spec.PriorityClassName = "research"
		return p
	}
	for _, tt := range []struct {
		name    string
		pod     *v1.Pod
		claimed string
		moves   int
	}{
		{"a research pod that fits n0 waits", research("fits", "8", nil), "", 0},
		{"n0 is claimed", nil, "n0", 0},
		{"a research pod wants 16 GPUs (no node has them)", research("never", "16", nil), "", 1},
		{"a research pod selects nodes that do not exist", research("nowhere", "8", map[string]string{"pool": "gone"}), "", 1},
		{"another node is claimed", nil, "n9", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			if tt.pod != nil {
				w.store(tt.pod)
			}
			if tt.claimed != "" {
				w.claimed[tt.claimed] = true
			}
			for i := range 5 {
				w.at(time.Duration(i) * time.Minute)
			}
			if w.moves() != tt.moves {
				t.Errorf("%d pods moved back, want %d", w.moves(), tt.moves)
			}
		})
	}
}

// TestFitIsTheProfiles: the fit check is the profile's own Filter
// plugins: a pod whose required anti-affinity n0 violates, or whose
// spread constraint it would break, stays where it is, though n0 has the
// GPUs.
func TestFitIsTheProfiles(t *testing.T) {
	antiAffinity := func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}}, TopologyKey: "kubernetes.io/hostname",
		}}}}
	}
	w := newWorld(t)
	// n0 runs a 1-GPU replica of serve; serve on vk wants 4 and must not
	// share a node with another replica.
	w.store(w.serving("serve-small", "n0", 1))
	big := w.serving("serve", "vk", 4)
	antiAffinity(big)
	w.store(big)
	for i := range 5 {
		w.at(time.Duration(i) * time.Minute)
	}
	if w.moves() != 0 {
		t.Fatalf("%d pods moved back onto a node their anti-affinity forbids", w.moves())
	}
	// Without the anti-affinity it fits.
	w.store(w.serving("serve", "vk", 4))
	for i := 5; i < 8; i++ {
		w.at(time.Duration(i) * time.Minute)
	}
	if w.moves() != 1 {
		t.Fatalf("%d moves once the pod fits, want 1", w.moves())
	}
}

// TestBarePodsStay: a production pod without a controller is never moved
// back: nothing would recreate it.
func TestBarePodsStay(t *testing.T) {
	w := newWorld(t)
	bare := w.serving("serve", "vk", 8)
	bare.OwnerReferences = nil
	w.store(bare)
	for i := range 5 {
		w.at(time.Duration(i) * time.Minute)
	}
	if w.moves() != 0 {
		t.Fatalf("a bare pod was evicted from the overflow node")
	}
}

// TestWaveTimesOut: a replacement that never turns Ready holds its
// budget's next wave back for waveTimeoutSeconds, no longer; the budget
// still paces it.
func TestWaveTimesOut(t *testing.T) {
	w, _ := waveInFlight(t)
	for d := 2 * time.Minute; d <= 6*time.Minute; d += time.Minute {
		w.at(d)
	}
	if w.moves() != 1 {
		t.Fatalf("%d moves while the first wave's replacement starts, want 1", w.moves())
	}
	w.at(6*time.Minute + 2*time.Second) // the replacement is 301 s old: past the 300 s timeout
	if w.moves() != 2 {
		t.Fatalf("%d moves after the wave timed out, want 2", w.moves())
	}
}

// of makes p a pod of ReplicaSet rs (UID "rs-"+rs), app rs.
func of(p *v1.Pod, rs string) *v1.Pod {
	p.Labels["app"] = rs
	p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = rs, types.UID("rs-"+rs)
	return p
}

// TestBudgetsReturnOnTheirOwn: each budget is spent and refilled on its
// own. Two ReplicaSets of two replicas (a default budget of one each)
// return one pod each; chat's replacement turns Ready on a physical node,
// serve's never does: chat's second pod moves at once, and serve's waits
// for its own replacement, not for a global wave.
func TestBudgetsReturnOnTheirOwn(t *testing.T) {
	w := newWorld(t)
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "rs-serve"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2)}})
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "chat", UID: "rs-chat"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2)}})
	serve2 := w.serving("serve-2", "vk", 0)
	serve2.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	w.store(serve2)
	chat1, chat2 := of(w.serving("chat-1", "vk", 0), "chat"), of(w.serving("chat-2", "vk", 0), "chat")
	chat2.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	w.store(chat1)
	w.store(chat2)
	w.at(0)
	w.at(time.Minute)
	if got := w.evictedNames(); !reflect.DeepEqual(got, []string{"chat-1", "serve"}) {
		t.Fatalf("first moves %v, want serve and chat-1 (one per budget)", got)
	}
	w.remove(w.serving("serve", "vk", 8))
	w.remove(chat1)
	replacement := of(w.serving("chat-new", "n0", 0), "chat")
	replacement.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	w.store(replacement)
	w.at(2 * time.Minute)
	if got := w.evictedNames(); !reflect.DeepEqual(got, []string{"chat-1", "chat-2", "serve"}) {
		t.Fatalf("moves %v once chat's replacement is Ready, want chat-2 moved and serve-2 waiting for serve's replacement", got)
	}
}

func (w *world) evictedNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string(nil), w.evicted...)
	sort.Strings(out)
	return out
}

// TestPendingReplacementHoldsItsRoom: the replacement of one budget's
// return, created but not yet placed, holds the room it is about to
// take: another budget's pod is not moved back into it (it would land on
// the overflow node again, a second cold start).
func TestPendingReplacementHoldsItsRoom(t *testing.T) {
	w := newWorld(t)
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "chat", UID: "rs-chat"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1)}})
	chat := of(w.serving("chat-1", "vk", 8), "chat")
	chat.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	w.store(chat)
	w.at(0)
	w.at(time.Minute)
	if got := w.evictedNames(); !reflect.DeepEqual(got, []string{"serve"}) {
		t.Fatalf("first moves %v, want serve (the older) alone: the room fits one", got)
	}
	w.remove(w.serving("serve", "vk", 8))
	pending := w.serving("serve-new", "", 8)
	pending.Status.Phase, pending.Status.Conditions = v1.PodPending, nil
	pending.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	w.store(pending)
	for d := 2 * time.Minute; d <= 4*time.Minute; d += 30 * time.Second {
		w.at(d)
	}
	if got := w.evictedNames(); !reflect.DeepEqual(got, []string{"serve"}) {
		t.Fatalf("moves %v while serve's replacement waits to be placed, want chat-1 kept on the overflow node", got)
	}
}

// TestReturnSeesOtherDisruptions: a ReplicaSet without a
// PodDisruptionBudget (8 replicas, the default budget lets 2 be down) has
// 2 replicas down already, evicted by a research claim, their
// replacements not Ready yet. Room for the 6 on the overflow node frees:
// none of them moves back before those replacements are Ready.
func TestReturnSeesOtherDisruptions(t *testing.T) {
	w := newWorld(t)
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "rs-serve"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](8)}})
	w.remove(w.serving("serve", "vk", 8))
	for i := range 6 {
		w.store(w.serving(fmt.Sprintf("serve-%d", i), "vk", 1))
	}
	for i := range 2 {
		starting := w.serving(fmt.Sprintf("serve-new-%d", i), "vk", 0)
		starting.Status.Conditions[0].Status = v1.ConditionFalse
		w.store(starting)
	}
	w.at(0)
	w.at(time.Minute)
	if got := w.evictedNames(); len(got) != 0 {
		t.Fatalf("returned %v with 2 of 8 replicas already down and a default budget of 2", got)
	}
}

// TestProductionLeftOutOfThePolicyComesHome: production on an overflow
// node whose namespace left the production namespaces (or was never
// labelled, as on an upgrade) still comes home when room frees: the
// policy keeps pods off the providers, never on them.
func TestProductionLeftOutOfThePolicyComesHome(t *testing.T) {
	w := newWorld(t)
	classes := w.rc.cfg.Classes
	classes.ProductionNamespaces = labels.SelectorFromSet(labels.Set{overflow.ProductionNamespaceLabel: "true"})
	classes.Namespace = func(string) (labels.Set, bool) { return labels.Set{}, true }
	w.at(0)
	w.at(61 * time.Second)
	if w.moves() != 1 {
		t.Errorf("%d moves of production outside the production namespaces after a full window of room, want 1", w.moves())
	}
}

// waveInFlight is a ReplicaSet of 9 on the overflow node (a default
// budget of 3) whose first return wave of 1 has evicted its oldest pod:
// the pod is being deleted, then gone, and its replacement, created at
// 1m01s, is starting (returned).
func waveInFlight(t *testing.T) (*world, *v1.Pod) {
	w := newWorld(t)
	w.store(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "rs-serve"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](9)}})
	for i := range 8 {
		p := w.serving(fmt.Sprintf("serve-%d", i), "vk", 0)
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
		w.store(p)
	}
	w.rc.cfg.Return.MaxPodsPerWave = 1
	w.at(0)
	w.at(time.Minute)
	if got := w.evictedNames(); !reflect.DeepEqual(got, []string{"serve"}) {
		t.Fatalf("first wave %v, want [serve] (the oldest)", got)
	}
	w.remove(w.serving("serve", "vk", 8))
	starting := w.serving("serve-new", "", 0)
	starting.Status = v1.PodStatus{Phase: v1.PodPending}
	starting.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute + time.Second))
	w.store(starting)
	return w, starting
}

// TestNewLeaderWaitsForTheWaveInFlight: a wave in flight is read from the
// API, not remembered: a new leader (a new controller and ledger over the
// same objects) starts no wave of a budget while a pod of its controller
// is being deleted or its replacement is starting, though the budget
// would allow it; it does once the replacement is Ready.
func TestNewLeaderWaitsForTheWaveInFlight(t *testing.T) {
	w, starting := waveInFlight(t)
	// The leader changes: nothing of the old one's memory is left.
	newLeader := func() {
		ledger, err := disruption.NewLedger(w.informers, intstr.FromString("25%"), w.client, w.recorder)
		if err != nil {
			t.Fatal(err)
		}
		cfg := w.rc.cfg
		cfg.Ledger = ledger
		w.rc = New(cfg)
	}
	newLeader()
	w.at(2 * time.Minute)
	w.at(3*time.Minute + time.Second)
	if w.moves() != 1 {
		t.Fatalf("%d moves by the new leader while the first wave's replacement starts, want 1", w.moves())
	}
	ready := w.serving("serve-new", "n0", 0)
	ready.CreationTimestamp = starting.CreationTimestamp
	w.store(ready)
	// Another actor's eviction (a claim's), not gone yet, holds it too.
	leaving := w.serving("serve-0", "vk", 0)
	leaving.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	leaving.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(3 * time.Minute)))
	w.store(leaving)
	newLeader()
	w.at(3*time.Minute + 2*time.Second)
	w.at(4*time.Minute + 3*time.Second)
	if w.moves() != 1 {
		t.Fatalf("%d moves while a pod of the controller is being deleted, want 1", w.moves())
	}
	w.remove(leaving)
	w.at(4*time.Minute + 4*time.Second)
	if w.moves() != 2 {
		t.Fatalf("%d moves once the replacement is Ready and nothing is leaving, want 2", w.moves())
	}
}
