// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// handle serves only the snapshot, all Score needs.
type handle struct {
	fwk.Handle
	snapshot  *cache.Snapshot
	informers informers.SharedInformerFactory
}

func (h handle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }

// SharedDRAManager is nil: no DRA here, as in a scheduler without it.
func (h handle) SharedDRAManager() fwk.SharedDRAManager { return nil }

func newHandle(snapshot *cache.Snapshot, objs ...runtime.Object) handle {
	return handle{snapshot: snapshot, informers: informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)}
}

func node(name, leaf string) *v1.Node {
	return st.MakeNode().Name(name).Label("leaf", leaf).Capacity(map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}).Obj()
}

func pod(name, node, class string, gpus string) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("ns").UID(name).Node(node).Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
	p.Spec.PriorityClassName = class
	return p
}

// newPlugin builds the plugin over a snapshot of nodes (leaf switches from
// the label "leaf") and the pods running on them.
func newPlugin(tb testing.TB, nodes []*v1.Node, running []*v1.Pod) (*InferencePacking, *cache.Snapshot) {
	return newPluginWith(tb, nodes, running, nil)
}

// newPluginWith also reads claims from store.
func newPluginWith(tb testing.TB, nodes []*v1.Node, running []*v1.Pod, store *claims.Store) (*InferencePacking, *cache.Snapshot) {
	tb.Helper()
	nodeInformer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes().Informer()
	for _, n := range nodes {
		if err := nodeInformer.GetStore().Add(n); err != nil {
			tb.Fatal(err)
		}
	}
	source, err := fabric.NewLabelSource([]string{"leaf"}, []string{"leaf"})
	if err != nil {
		tb.Fatal(err)
	}
	tracker, err := fabric.NewTracker(source, nodeInformer)
	if err != nil {
		tb.Fatal(err)
	}
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		tb.Fatal(err)
	}
	snapshot := cache.NewSnapshot(running, nodes)
	rt := &sealedRuntime{tracker: tracker, classes: classes, fabric: &config.FabricConfig{GPUResourceName: "nvidia.com/gpu"}, store: store}
	if store != nil {
		// The room claims hold is the disruption ledger's.
		if rt.ledger, err = disruption.NewLedger(informers.NewSharedInformerFactory(fake.NewClientset(), 0), intstr.FromString("25%"), nil, nil); err != nil {
			tb.Fatal(err)
		}
		rt.ledger.HoldRoomOf(store)
	}
	return &InferencePacking{rt: rt, handle: newHandle(snapshot), waiting: requeue.NewWaiting(nil),
		clock: testingclock.NewFakePassiveClock(time.Now())}, snapshot
}

// sealedRuntime is a runtime sealed with these pieces.
type sealedRuntime struct {
	tracker *fabric.Tracker
	classes *overflow.Classes
	fabric  *config.FabricConfig
	store   *claims.Store
	ledger  *disruption.Ledger
}

func (r *sealedRuntime) Declare(context.Context, fwk.Handle, *field.Path, config.Facts) error {
	return nil
}
func (r *sealedRuntime) Seal() error                                     { return nil }
func (r *sealedRuntime) Fabric() (*fabric.Tracker, *config.FabricConfig) { return r.tracker, r.fabric }
func (r *sealedRuntime) Classes() *overflow.Classes                      { return r.classes }
func (r *sealedRuntime) Claims() *claims.Store                           { return r.store }
func (r *sealedRuntime) Ledger() *disruption.Ledger                      { return r.ledger }

// TestScoreWorkedExample is the worked example of Score's doc comment: a
// 1-GPU production pod, 8-GPU nodes.
func TestScoreWorkedExample(t *testing.T) {
	overflowNode := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{"pods": "5000", "nvidia.com/gpu": "64"}).Obj()
	nodes := []*v1.Node{node("a1", "leaf-a"), node("a2", "leaf-a"), node("b1", "leaf-b"), node("b2", "leaf-b"), overflowNode}
	running := []*v1.Pod{
		pod("serve-0", "a1", "production", "4"),
		// Research on b2 does not make leaf-b a production leaf.
		pod("train-0", "b2", "research", "8"),
	}
	pl, snapshot := newPlugin(t, nodes, running)

	incoming := pod("serve-1", "", "production", "1")
	state := framework.NewCycleState()
	ctx := context.Background()
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	if s := pl.PreScore(ctx, state, incoming, infos); !s.IsSuccess() {
		t.Fatalf("PreScore: %v", s)
	}
	got := map[string]int64{}
	for _, ni := range infos {
		score, s := pl.Score(ctx, state, incoming, ni)
		if !s.IsSuccess() {
			t.Fatalf("Score %s: %v", ni.Node().Name, s)
		}
		got[ni.Node().Name] = score
	}
	want := map[string]int64{
		"a1": 40 + 30 + 20 + 10*5/8, // runs production, leaf runs production, 5 of 8 GPUs after the pod: 96
		"a2": 40 + 20 + 10*1/8,      // empty node in a production leaf: 61
		"b1": 40 + 10*1/8,           // empty node in a leaf without production: 41
		"b2": 40 + 10*8/8,           // full with research (the filter rejects it; the score caps at 8 of 8): 50
		"vk": 0,                     // overflow node: last
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}

	// A second cycle after a1's production left rescans only a1.
	snapshot2 := cache.NewSnapshot(running[1:], nodes)
	pl.handle = newHandle(snapshot2)
	infos2, _ := snapshot2.NodeInfos().List()
	state2 := framework.NewCycleState()
	if s := pl.PreScore(ctx, state2, incoming, infos2); !s.IsSuccess() {
		t.Fatal(s)
	}
	for _, ni := range infos2 {
		if ni.Node().Name != "a1" {
			continue
		}
		if score, _ := pl.Score(ctx, state2, incoming, ni); score != 40+10*1/8 {
			t.Errorf("a1 without production scores %d, want 41", score)
		}
	}

	// The same NodeInfo changed in place (a new generation), as when
	// this profile reserved production on b1: that makes leaf-b a
	// production leaf for b2 too.
	byName := map[string]*framework.NodeInfo{}
	for _, ni := range infos2 {
		byName[ni.Node().Name] = ni.(*framework.NodeInfo)
	}
	serve2 := pod("serve-2", "b1", "production", "2")
	byName["b1"].AddPod(serve2)
	if s := pl.Reserve(ctx, framework.NewCycleState(), serve2, "b1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	state3 := framework.NewCycleState()
	if s := pl.PreScore(ctx, state3, incoming, infos2); !s.IsSuccess() {
		t.Fatal(s)
	}
	got = map[string]int64{}
	for _, ni := range infos2 {
		got[ni.Node().Name], _ = pl.Score(ctx, state3, incoming, ni)
	}
	want = map[string]int64{"a1": 41, "a2": 41, "b1": 40 + 30 + 20 + 10*3/8, "b2": 40 + 20 + 10*8/8, "vk": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after b1 took production, scores (-want,+got):\n%s", diff)
	}

	// Research taking GPUs on a2 (another profile's pod: no hint)
	// changes only its GPU term, which Score reads from the node.
	byName["a2"].AddPod(pod("train-1", "a2", "research", "4"))
	state4 := framework.NewCycleState()
	if s := pl.PreScore(ctx, state4, incoming, infos2); !s.IsSuccess() {
		t.Fatal(s)
	}
	if score, _ := pl.Score(ctx, state4, incoming, byName["a2"]); score != 40+10*5/8 {
		t.Errorf("a2 with 4 GPUs taken scores %d, want 46", score)
	}
	// The cycle before b1 took production keeps what it saw of
	// production (its GPUs are read from the node: 2 taken).
	if score, _ := pl.Score(ctx, state2, incoming, byName["b1"]); score != 40+10*3/8 {
		t.Errorf("the cycle before b1 took production scores it %d, want 43", score)
	}
}

// TestIncrementalMatchesFresh checks the incremental view against one
// built from scratch, over snapshots whose node lists come in a different
// order each time (cache.NewSnapshot builds them from a map) and whose
// production moves around.
func TestIncrementalMatchesFresh(t *testing.T) {
	var nodes []*v1.Node
	for i := range 200 {
		nodes = append(nodes, node(fmt.Sprintf("n%03d", i), fmt.Sprintf("leaf-%d", i/4)))
	}
	for i := range 2 {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("vk%d", i)).Label("type", "virtual-kubelet").
			Capacity(map[v1.ResourceName]string{"pods": "5000", "nvidia.com/gpu": "64"}).Obj())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	incremental, _ := newPlugin(t, nodes, nil)
	ctx := context.Background()
	incoming := pod("serve-x", "", "production", "1")
	scores := func(pl *InferencePacking, infos []fwk.NodeInfo) map[string]int64 {
		state := framework.NewCycleState()
		if s := pl.PreScore(ctx, state, incoming, infos); !s.IsSuccess() {
			t.Fatal(s)
		}
		out := map[string]int64{}
		for _, ni := range infos {
			out[ni.Node().Name], _ = pl.Score(ctx, state, incoming, ni)
		}
		return out
	}
	for round := range 30 {
		var running []*v1.Pod
		for _, n := range nodes {
			switch rng.IntN(3) {
			case 0:
				running = append(running, pod("serve-"+n.Name, n.Name, "production", "1"))
			case 1:
				running = append(running, pod("train-"+n.Name, n.Name, "research", "8"))
			}
		}
		fresh, snapshot := newPlugin(t, nodes, running)
		incremental.handle = fresh.handle
		infos, err := snapshot.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(scores(fresh, infos), scores(incremental, infos)); diff != "" {
			t.Fatalf("round %d: incremental scores differ from fresh ones (-fresh,+incremental):\n%s", round, diff)
		}
	}
}

// BenchmarkPreScore is one production pod's PreScore and Score at 5,000
// nodes (half of them running production) when nothing changed since the
// last cycle, the steady state of a busy scheduler.
func BenchmarkPreScore(b *testing.B) {
	nodes, running := halfServing(5000, 32)
	pl, snapshot := newPlugin(b, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	incoming := pod("serve-x", "", "production", "1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		state := framework.NewCycleState()
		if s := pl.PreScore(ctx, state, incoming, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		// The scheduler scores about 10% of 5,000 nodes.
		for _, ni := range infos[:500] {
			if _, s := pl.Score(ctx, state, incoming, ni); !s.IsSuccess() {
				b.Fatal(s)
			}
		}
	}
}

// halfServing is n nodes named n0000..., perLeaf to a leaf switch, the
// even ones running a 2-GPU production pod.
func halfServing(n, perLeaf int) ([]*v1.Node, []*v1.Pod) {
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range n {
		name := fmt.Sprintf("n%04d", i)
		nodes = append(nodes, node(name, fmt.Sprintf("leaf-%03d", i/perLeaf)))
		if i%2 == 0 {
			running = append(running, pod("serve-"+name, name, "production", "2"))
		}
	}
	return nodes, running
}

// cpuPod is a pod of class that asks for no GPU.
func cpuPod(name, class string) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("ns").UID(name).Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
	p.Spec.PriorityClassName = class
	return p
}

// TestFilterSkippedUnlessClaimed: for a pod that asks for no GPU, Filter
// runs only for production, and only while a claim holds a node; then it
// turns production away from exactly the claimed nodes (a pod that asks
// for GPUs is checked for room by Filter: TestFilterRejectsAsNodeResourcesFit).
func TestFilterSkippedUnlessClaimed(t *testing.T) {
	nodes := []*v1.Node{node("n0", "l0"), node("n1", "l0")}
	serve, train := cpuPod("serve", "production"), cpuPod("train", "research")
	cycle := func(pl *InferencePacking, p *v1.Pod) (fwk.CycleState, *fwk.Status) {
		state := framework.NewCycleState()
		_, status := pl.PreFilter(t.Context(), state, p, nil)
		return state, status
	}

	pl, _ := newPlugin(t, nodes, nil)
	if _, status := cycle(pl, serve); !status.IsSkip() {
		t.Errorf("no claims served: PreFilter = %v, want Skip", status)
	}

	store := claimStore(t)
	pl, snapshot := newPluginWith(t, nodes, nil, store)
	if _, status := cycle(pl, serve); !status.IsSkip() {
		t.Errorf("no claim holds a node: PreFilter = %v, want Skip", status)
	}
	claim := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}
	claim.Spec.Claimants = []v1alpha1.Claimant{{Name: "train", UID: "train", Node: "n1"}}
	if _, err := store.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return store.NodeClaimed("n1"), nil
	}); err != nil {
		t.Fatalf("the claim never reached the store: %v", err)
	}
	if _, status := cycle(pl, train); !status.IsSkip() {
		t.Errorf("research pod: PreFilter = %v, want Skip", status)
	}
	state, status := cycle(pl, serve)
	if !status.IsSuccess() {
		t.Fatalf("production with n1 claimed: PreFilter = %v, want Success", status)
	}
	for _, n := range nodes {
		ni, err := snapshot.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		got, want := pl.Filter(t.Context(), state, serve, ni).Code(), fwk.Success
		if n.Name == "n1" {
			want = fwk.Unschedulable
		}
		if got != want {
			t.Errorf("Filter(serve, %s) = %v, want %v", n.Name, got, want)
		}
	}
}

// TestFilterKeepsPodsOffOverflowNodesThatCannotRunThem: a pod that
// tolerates the overflow taint is turned away from an overflow node none
// of whose providers can run it (here: it reads a Secret), saying why;
// a pod they can run, or one that cannot go there anyway, passes Filter
// there (or skips it).
func TestFilterKeepsPodsOffOverflowNodesThatCannotRunThem(t *testing.T) {
	vk := node("vk", "")
	vk.Labels = map[string]string{"type": "virtual-kubelet"}
	vk.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	raw, err := offer.Offer{Providers: []offer.Provider{{Name: "burst", Healthy: true, Carries: &offer.Carries{Volumes: []string{"emptyDir"}},
		Capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("64")}}}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	vk.Annotations = map[string]string{offer.Annotation: raw}
	nodes := []*v1.Node{node("n0", "l0"), vk}
	pl, snapshot := newPlugin(t, nodes, nil)
	readOffer(t, pl, snapshot, vk)
	tolerating := func(p *v1.Pod) *v1.Pod {
		p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
		return p
	}
	secret := tolerating(pod("secret", "", "production", "1"))
	secret.Spec.Containers = []v1.Container{{Name: "vllm", Env: []v1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}}}

	for _, p := range []*v1.Pod{tolerating(pod("plain", "", "production", "1")), pod("no-toleration", "", "production", "1"),
		tolerating(cpuPod("plain-cpu", "production")), cpuPod("no-toleration-cpu", "production")} {
		state := framework.NewCycleState()
		_, status := pl.PreFilter(t.Context(), state, p, nil)
		if status.IsSkip() {
			continue
		}
		if !status.IsSuccess() {
			t.Fatalf("%s: PreFilter = %v", p.Name, status)
		}
		for _, n := range nodes {
			ni, err := snapshot.Get(n.Name)
			if err != nil {
				t.Fatal(err)
			}
			if status := pl.Filter(t.Context(), state, p, ni); !status.IsSuccess() {
				t.Errorf("Filter(%s, %s) = %v, want Success", p.Name, n.Name, status)
			}
		}
	}
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(t.Context(), state, secret, nil); !status.IsSuccess() {
		t.Fatalf("secret pod: PreFilter = %v, want Success", status)
	}
	for _, n := range nodes {
		ni, err := snapshot.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		status := pl.Filter(t.Context(), state, secret, ni)
		switch n.Name {
		case "vk":
			if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), ReasonCannotRunThere) ||
				!strings.Contains(status.Message(), "provider burst: spec.containers[0] (vllm): env HF_TOKEN refers to Secret hf") {
				t.Errorf("Filter(secret, vk) = %v, want UnschedulableAndUnresolvable naming provider burst and env HF_TOKEN", status)
			}
		default:
			if !status.IsSuccess() {
				t.Errorf("Filter(secret, %s) = %v, want Success", n.Name, status)
			}
		}
	}
	if pl.waiting.Len() != 1 {
		t.Errorf("%d pods wait for an overflow node's offer to change, want 1", pl.waiting.Len())
	}
}

// readOffer gives the plugin a node informer that holds overflow node vk
// and waits until the plugin has read vk's offer.
func readOffer(t *testing.T, pl *InferencePacking, snapshot *cache.Snapshot, vk *v1.Node) {
	t.Helper()
	h := newHandle(snapshot, vk)
	pl.handle = h
	if err := pl.ready(); err != nil {
		t.Fatal(err)
	}
	h.informers.Start(t.Context().Done())
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		_, ok := (*pl.offers.Load())[vk.Name]
		return ok, nil
	}); err != nil {
		t.Fatalf("the overflow node's offer never reached the plugin: %v", err)
	}
}

// claimStore is a claim store over a fake cluster that serves
// ResearchClaims.
func claimStore(t *testing.T) *claims.Store {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{v1alpha1.Resource: v1alpha1.Kind + "List"})
	disco := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{
		GroupVersion: v1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: v1alpha1.Resource.Resource, Namespaced: true, Kind: v1alpha1.Kind}},
	}}
	store := claims.NewStore(t.Context(), dyn, disco)
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return store.Served(), nil
	}); err != nil {
		t.Fatalf("the claim store never synced: %v", err)
	}
	return store
}

// TestFilterCountsOverflowRoomByProvider: a pod goes to an overflow node
// only when one provider behind it has room for the whole pod, less what
// live claims hold there for their victims: two providers with 4 free GPUs
// each take no 8-GPU pod (dispatch would fail, the pod be replaced and
// bound there again), and room a claim holds for its victims is not
// taken by another pod (an HPA's scale-up, say), though a victim's own
// replacement takes the room held for it.
func TestFilterCountsOverflowRoomByProvider(t *testing.T) {
	vk := node("vk", "")
	vk.Labels = map[string]string{"type": "virtual-kubelet"}
	vk.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	vk.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("16")
	vk.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("16")
	raw, err := offer.Offer{Providers: []offer.Provider{
		{Name: "a", Healthy: true, Capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
		{Name: "b", Healthy: true, Capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
	}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	vk.Annotations = map[string]string{offer.Annotation: raw}
	// Each provider runs a 4-GPU pod already: 4 free at each.
	var running []*v1.Pod
	for _, provider := range []string{"a", "b"} {
		p := pod("run-"+provider, "vk", "production", "4")
		p.Status.Conditions = []v1.PodCondition{{Type: offer.ProviderCondition, Status: v1.ConditionTrue, Reason: provider}}
		running = append(running, p)
	}
	store := claimStore(t)
	nodes := []*v1.Node{node("n0", "l0"), vk}
	pl, snapshot := newPluginWith(t, nodes, running, store)
	readOffer(t, pl, snapshot, vk)
	serving := func(name, gpus, owner string) *v1.Pod {
		p := pod(name, "", "production", gpus)
		p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: types.UID("rs-" + owner), Controller: ptr.To(true)}}
		return p
	}
	filterVK := func(p *v1.Pod) *fwk.Status {
		t.Helper()
		state := framework.NewCycleState()
		if _, status := pl.PreFilter(t.Context(), state, p, nil); !status.IsSuccess() {
			t.Fatalf("%s: PreFilter = %v, want Success", p.Name, status)
		}
		ni, err := snapshot.Get("vk")
		if err != nil {
			t.Fatal(err)
		}
		return pl.Filter(t.Context(), state, p, ni)
	}
	if status := filterVK(serving("eight", "8", "big")); status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), ReasonNoRoom) {
		t.Errorf("8 GPUs on two providers with 4 free each: Filter = %v, want Unschedulable, %s", status, ReasonNoRoom)
	}
	if status := filterVK(serving("four", "4", "small")); !status.IsSuccess() {
		t.Errorf("4 GPUs on a provider with 4 free: Filter = %v, want Success", status)
	}

	// A live claim holds 4 GPUs on each provider for two victims of
	// ReplicaSet serve, one of them evicted already.
	claim := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}
	claim.Spec.Claimants = []v1alpha1.Claimant{{Name: "train", UID: "train", Node: "n0"}}
	for i, provider := range []string{"a", "b"} {
		claim.Spec.Victims = append(claim.Spec.Victims, v1alpha1.Victim{Namespace: "ns", Name: fmt.Sprintf("serve-%d", i), UID: types.UID(fmt.Sprintf("serve-%d", i)), Node: "n0",
			Owner: v1alpha1.Owner{Kind: "ReplicaSet", Name: "serve", UID: "rs-serve"}, Budget: "default/ns/ReplicaSet/serve",
			Target: v1alpha1.Target{Node: "vk", Provider: provider}, Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}})
	}
	created, err := store.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Evicted = []v1alpha1.Eviction{{UID: "serve-0", Time: metav1.Now()}}
	if _, err := store.UpdateStatus(t.Context(), created); err != nil {
		t.Fatal(err)
	}
	if status := filterVK(serving("scale-up", "4", "small")); status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), ReasonNoRoom) {
		t.Errorf("4 GPUs where a claim holds every GPU for its victims: Filter = %v, want Unschedulable, %s", status, ReasonNoRoom)
	}
	if status := filterVK(serving("serve-new", "4", "serve")); !status.IsSuccess() {
		t.Errorf("the replacement of the evicted victim: Filter = %v, want Success (the room held for it)", status)
	}
	// The count of the node's pods is kept per NodeInfo generation: once
	// a pod fills provider a (a new generation), it is counted.
	if err := store.Delete(t.Context(), "ns", "train"); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return len(store.Reservations()) == 0, nil
	}); err != nil {
		t.Fatalf("the deleted claim still holds room: %v", err)
	}
	full := pod("run-a2", "vk", "production", "4")
	full.Status.Conditions = []v1.PodCondition{{Type: offer.ProviderCondition, Status: v1.ConditionTrue, Reason: "a"}}
	// The node's own allocatable is large, so only the providers' room
	// decides.
	big := vk.DeepCopy()
	big.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("64")
	ni := framework.NewNodeInfo(append(running, full)...)
	ni.SetNode(big)
	p := serving("four-again", "4", "small")
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(t.Context(), state, p, nil); !status.IsSuccess() {
		t.Fatalf("PreFilter = %v", status)
	}
	if status := pl.Filter(t.Context(), state, p, ni); !status.IsSuccess() {
		t.Errorf("4 GPUs with provider b free: Filter = %v, want Success", status)
	}
	full2 := pod("run-b2", "vk", "production", "4")
	full2.Status.Conditions = []v1.PodCondition{{Type: offer.ProviderCondition, Status: v1.ConditionTrue, Reason: "b"}}
	ni.AddPod(full2)
	if status := pl.Filter(t.Context(), state, p, ni); status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), ReasonNoRoom) {
		t.Errorf("4 GPUs with both providers full (a pod added since the last count): Filter = %v, want Unschedulable, %s", status, ReasonNoRoom)
	}
}
