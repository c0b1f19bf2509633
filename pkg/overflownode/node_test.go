// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// fakeProvider is an in-memory provider for unit tests.
type fakeProvider struct {
	mu        sync.Mutex
	workloads map[string]provider.Workload
	capacity  v1.ResourceList
	down      error
	creates   int
	// refuse is what Create returns for every pod (e.g. ErrUnsupported).
	refuse  error
	carries offer.Carries
	// refs is what each Create was given, by id, in order.
	refs map[string][]provider.Refs
	// entered, when set, is told of each Create, which then waits for
	// release.
	entered, release chan struct{}
	// logsHang makes Logs wait for its context, as a provider that never
	// answers.
	logsHang bool
}

func newFake(gpus string) *fakeProvider {
	return &fakeProvider{workloads: map[string]provider.Workload{}, capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}
}

func (f *fakeProvider) Create(_ context.Context, id string, pod *v1.Pod, refs provider.Refs) error {
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return f.down
	}
	if f.refuse != nil {
		return f.refuse
	}
	if !refs.Empty() {
		if f.refs == nil {
			f.refs = map[string][]provider.Refs{}
		}
		f.refs[id] = append(f.refs[id], refs)
	}
	if _, ok := f.workloads[id]; ok {
		return nil
	}
	f.creates++
	f.workloads[id] = provider.Workload{ID: id, Node: "sluice-overflow", Phase: provider.Running, Ready: true,
		Pod: provider.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	return nil
}

func (f *fakeProvider) UpdateRefs(_ context.Context, id string, _ *v1.Pod, refs provider.Refs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.workloads[id]; !ok {
		return provider.ErrNotFound
	}
	if f.refs == nil {
		f.refs = map[string][]provider.Refs{}
	}
	f.refs[id] = append(f.refs[id], refs)
	return nil
}

func (f *fakeProvider) Adopt(_ context.Context, id string, ref provider.PodRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workloads[id]
	if !ok {
		return provider.ErrNotFound
	}
	w.Pod = ref
	f.workloads[id] = w
	return nil
}

func (f *fakeProvider) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.workloads, id)
	return nil
}

func (f *fakeProvider) Get(_ context.Context, id string) (*provider.Workload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workloads[id]
	if !ok {
		return nil, provider.ErrNotFound
	}
	return &w, nil
}

func (f *fakeProvider) List(context.Context) ([]provider.Workload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		return nil, f.down
	}
	out := []provider.Workload{}
	for _, w := range f.workloads {
		out = append(out, w)
	}
	return out, nil
}

func (f *fakeProvider) Capacity(context.Context) (v1.ResourceList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity.DeepCopy(), nil
}

func (f *fakeProvider) Health(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

func (f *fakeProvider) Carries() offer.Carries { return f.carries }

// Logs returns one line naming the workload and container, and what it
// was asked.
func (f *fakeProvider) Logs(ctx context.Context, id, container string, o provider.LogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	hang := f.logsHang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.workloads[id]; !ok {
		return nil, provider.ErrNotFound
	}
	return io.NopCloser(strings.NewReader(fmt.Sprintf("%s/%s tail=%d follow=%v\n", id, container, o.Tail, o.Follow))), nil
}

func (f *fakeProvider) set(fn func(*fakeProvider)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fixture is a Node over fake providers, a fake clientset and a pod
// indexer the test fills.
type fixture struct {
	node     *Node
	client   *fake.Clientset
	pods     cache.Indexer
	statuses map[string]v1.PodStatus // last status sent, by pod name
	nodes    []*v1.Node
	clock    time.Time
}

func newFixture(t *testing.T, members ...*Member) *fixture {
	t.Helper()
	cfg := &Config{APIVersion: APIVersion, Kind: Kind}
	for _, m := range members {
		cfg.Providers = append(cfg.Providers, m.Config)
	}
	cfg.Default()
	f := &fixture{client: fake.NewClientset(), pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		statuses: map[string]v1.PodStatus{}, clock: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	f.node = New(cfg, members, f.client, corelisters.NewPodLister(f.pods), record.NewFakeRecorder(1000))
	f.node.now = func() time.Time { return f.clock }
	f.node.NotifyPods(context.Background(), func(p *v1.Pod) {
		f.statuses[p.Name] = p.Status
		// As virtual-kubelet would: the apiserver now has this status.
		stored := p.DeepCopy()
		if err := f.pods.Update(stored); err != nil {
			t.Errorf("updating pod %s: %v", p.Name, err)
		}
		if _, err := f.client.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating pod %s: %v", p.Name, err)
		}
	})
	f.node.NotifyNodeStatus(context.Background(), func(n *v1.Node) { f.nodes = append(f.nodes, n) })
	return f
}

func member(name string, priority int32, price float64, p provider.Provider) *Member {
	return &Member{Config: ProviderConfig{Name: name, Type: TypeHTTP, Priority: priority, PricePerGPUHour: price}, Provider: p}
}

func (f *fixture) addPod(t *testing.T, name string, gpus int) *v1.Pod {
	t.Helper()
	q := resource.MustParse(fmt.Sprint(gpus))
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: "sluice-overflow", Containers: []v1.Container{{Name: "c", Image: "img",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}, Limits: v1.ResourceList{"nvidia.com/gpu": q}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if err := f.pods.Add(p); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Pods("serve").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	obj, ok, err := f.pods.GetByKey("serve/" + name)
	if err != nil || !ok {
		t.Fatalf("pod %s: %v", name, err)
	}
	return obj.(*v1.Pod)
}

func TestDispatchOrderAndRoom(t *testing.T) {
	// a: priority 0, 2 GPUs. b and c: priority 1; c is cheaper, so c comes
	// before b. Five 1-GPU pods: a, a, c, c, b.
	a, b, c := newFake("2"), newFake("4"), newFake("2")
	f := newFixture(t, member("b", 1, 3.0, b), member("a", 0, 9.0, a), member("c", 1, 1.5, c))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	var got []string
	for i := range 5 {
		p := f.addPod(t, fmt.Sprintf("llm-%d", i), 1)
		if err := f.node.CreatePod(ctx, p); err != nil {
			t.Fatalf("CreatePod %s: %v", p.Name, err)
		}
		got = append(got, dispatchedTo(f.pod(t, p.Name)))
	}
	if diff := cmp.Diff([]string{"a", "a", "c", "c", "b"}, got); diff != "" {
		t.Errorf("dispatch order (-want,+got):\n%s", diff)
	}
	// b has 3 GPUs left: a 4-GPU pod fits nowhere now, and the error says
	// why for every provider (a and c are smaller than it in all).
	big := f.addPod(t, "big", 4)
	err := f.node.CreatePod(ctx, big)
	if err == nil || !strings.Contains(err.Error(), "a: the pod requests 4 nvidia.com/gpu, more than the provider's 2 in all") || !strings.Contains(err.Error(), "b: no room (needs 4 nvidia.com/gpu, 3 free)") {
		t.Errorf("CreatePod big = %v, want a too small and no room at b (3 free)", err)
	}
}

func TestStatusTranslation(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1)
	id := provider.IDFor(pod.UID)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	p.set(func(f *fakeProvider) {
		w := f.workloads[id]
		w.Phase, w.Ready, w.Message = provider.Pending, false, "pulling image"
		f.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	st := f.statuses["llm-0"]
	if st.Phase != v1.PodPending || condition(st, v1.PodReady) != "False:RemoteNotReady:pulling image" {
		t.Errorf("pending workload: phase %s, Ready %q", st.Phase, condition(st, v1.PodReady))
	}
	if got := condition(st, RemoteCondition); got != "True:cloud:runs as "+id+" at provider cloud" {
		t.Errorf("remote condition = %q", got)
	}
	p.set(func(f *fakeProvider) {
		w := f.workloads[id]
		w.Phase, w.Ready, w.Message = provider.Running, true, ""
		f.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	st = f.statuses["llm-0"]
	if st.Phase != v1.PodRunning || condition(st, v1.PodReady) != "True::" {
		t.Errorf("serving workload: phase %s, Ready %q, want Running, True", st.Phase, condition(st, v1.PodReady))
	}
	// The addresses it reports are the pod's IPs, in canonical form.
	p.set(func(f *fakeProvider) {
		w := f.workloads[id]
		w.Addresses = []string{"::ffff:10.20.3.7", "fd00::0:7"}
		f.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	st = f.statuses["llm-0"]
	if st.PodIP != "10.20.3.7" || len(st.PodIPs) != 2 || st.PodIPs[1].IP != "fd00::7" {
		t.Errorf("pod IPs %q %v, want 10.20.3.7 and fd00::7", st.PodIP, st.PodIPs)
	}
	// An unchanged workload sends no new status.
	before := len(f.statuses)
	delete(f.statuses, "llm-0")
	f.node.Reconcile(ctx)
	if _, sent := f.statuses["llm-0"]; sent || len(f.statuses) != before-1 {
		t.Errorf("unchanged workload sent a status update")
	}
	p.set(func(f *fakeProvider) {
		w := f.workloads[id]
		w.Phase, w.Ready, w.Message = provider.Failed, false, "OOMKilled"
		f.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	st = f.statuses["llm-0"]
	if st.Phase != v1.PodFailed || st.Reason != ReasonRemoteFailed || !strings.Contains(st.Message, "OOMKilled") {
		t.Errorf("failed workload: phase %s reason %s message %q", st.Phase, st.Reason, st.Message)
	}
}

func condition(st v1.PodStatus, typ v1.PodConditionType) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return fmt.Sprintf("%s:%s:%s", c.Status, c.Reason, c.Message)
		}
	}
	return ""
}

func TestVanishedWorkloadFailsThePod(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(time.Minute) // past the creation grace
	p.set(func(f *fakeProvider) { f.workloads = map[string]provider.Workload{} })
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-0"]; st.Phase == v1.PodFailed {
		t.Fatalf("pod failed after one missed listing; want %d", lostAfter)
	}
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-0"]; st.Phase != v1.PodFailed || st.Reason != ReasonRemoteLost {
		t.Errorf("after %d missed listings: phase %s reason %s, want Failed %s", lostAfter, st.Phase, st.Reason, ReasonRemoteLost)
	}
	// A restarted process does not re-run a vanished workload either.
	if err := f.node.CreatePod(ctx, f.pod(t, "llm-0")); err != nil || p.creates != 1 {
		t.Errorf("CreatePod of a dispatched pod: err %v, creates %d; want nil, 1", err, p.creates)
	}
}

func TestProviderDown(t *testing.T) {
	a, b := newFake("8"), newFake("4")
	f := newFixture(t, member("a", 0, 0, a), member("b", 1, 0, b))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got := gpus(f.nodes[len(f.nodes)-1]); got != "12" {
		t.Errorf("node capacity with both providers = %s GPUs, want 12", got)
	}
	a.set(func(f *fakeProvider) { f.down = errors.New("connection refused") })
	f.node.Reconcile(ctx)
	last := f.nodes[len(f.nodes)-1]
	if got := gpus(last); got != "4" || !nodeReady(last) {
		t.Errorf("a down: capacity %s GPUs ready %v, want 4, ready", got, nodeReady(last))
	}
	// New pods go to b; the pod at a keeps its status until the timeout.
	next := f.addPod(t, "llm-1", 1)
	if err := f.node.CreatePod(ctx, next); err != nil || dispatchedTo(f.pod(t, "llm-1")) != "b" {
		t.Errorf("dispatch with a down: err %v, to %q; want b", err, dispatchedTo(f.pod(t, "llm-1")))
	}
	f.clock = f.clock.Add(DefaultProviderFailureTimeout)
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-0"]; st.Phase != v1.PodFailed || st.Reason != ReasonProviderUnavailable {
		t.Errorf("pod at a after the failure timeout: %s %s, want Failed %s", st.Phase, st.Reason, ReasonProviderUnavailable)
	}
	b.set(func(f *fakeProvider) { f.down = errors.New("503") })
	f.node.Reconcile(ctx)
	last = f.nodes[len(f.nodes)-1]
	if nodeReady(last) || gpus(last) != "0" {
		t.Errorf("no provider healthy: ready %v capacity %s, want NotReady, 0 GPUs", nodeReady(last), gpus(last))
	}
	// When a comes back, its workload for the failed pod is collected.
	a.set(func(f *fakeProvider) { f.down = nil })
	f.node.Reconcile(ctx)
	if len(a.workloads) != 0 {
		t.Errorf("a still runs %d workloads for a failed pod", len(a.workloads))
	}
}

// TestPodNoProviderCanRunIsFailed: a pod bound here that no provider can
// ever run as written (one does not carry the Secret it reads, the other
// is smaller than the pod in all) is failed at once, so its controller
// replaces it, instead of staying bound and pending for good.
func TestPodNoProviderCanRunIsFailed(t *testing.T) {
	plain, small := newFake("8"), newFake("1")
	small.carries = offer.Carries{Secrets: true}
	f := newFixture(t, member("plain", 0, 0, plain), member("small", 1, 0, small))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 2)
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}
	if err := f.pods.Update(pod); err != nil {
		t.Fatal(err)
	}
	_ = f.node.CreatePod(ctx, pod)
	st := f.statuses["llm-0"]
	if st.Phase != v1.PodFailed || st.Reason != ReasonCannotRun || !strings.Contains(st.Message, "plain: spec.containers[0] (c): env HF_TOKEN refers to Secret hf") ||
		!strings.Contains(st.Message, "small: the pod requests 2 nvidia.com/gpu, more than the provider's 1 in all") {
		t.Errorf("pod no provider can run: phase %q reason %q message %q; want Failed %s naming both providers' reasons", st.Phase, st.Reason, st.Message, ReasonCannotRun)
	}
	if plain.creates+small.creates != 0 {
		t.Errorf("a provider that cannot run the pod was asked to create it")
	}
}

// TestRefusedAtCreateWaitsForTheTimeout: a provider that refuses a pod at
// Create (a remote admission or quota answer, which may clear) does not
// get it failed at once; the dispatch timeout does.
func TestRefusedAtCreateWaitsForTheTimeout(t *testing.T) {
	p := newFake("8")
	p.refuse = fmt.Errorf("%w: remote cluster refused pod: exceeded quota", provider.ErrUnsupported)
	f := newFixture(t, member("remote", 0, 0, p))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	if err := f.node.CreatePod(ctx, f.addPod(t, "llm-0", 1)); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("CreatePod = %v, want the refusal", err)
	}
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-0"]; st.Phase == v1.PodFailed {
		t.Fatalf("a pod refused at Create was failed at once (%s)", st.Reason)
	}
	f.clock = f.clock.Add(DefaultDispatchTimeout)
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-0"]; st.Phase != v1.PodFailed || st.Reason != ReasonDispatchTimeout {
		t.Errorf("after the dispatch timeout: phase %q reason %q, want Failed %s", st.Phase, st.Reason, ReasonDispatchTimeout)
	}
}

// TestDispatchTimeout: a pod no provider starts (here: every provider is
// full) is failed once the dispatch timeout passes, not left bound and
// pending.
func TestDispatchTimeout(t *testing.T) {
	p := newFake("1")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	if err := f.node.CreatePod(ctx, f.addPod(t, "llm-0", 1)); err != nil {
		t.Fatal(err)
	}
	late := f.addPod(t, "llm-1", 1)
	if err := f.node.CreatePod(ctx, late); err == nil {
		t.Fatalf("a second pod was dispatched to a full provider")
	}
	f.node.Reconcile(ctx)
	f.clock = f.clock.Add(time.Minute)
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-1"]; st.Phase == v1.PodFailed {
		t.Fatalf("pod failed after a minute without a provider; the timeout is %s", DefaultDispatchTimeout)
	}
	f.clock = f.clock.Add(10 * time.Minute)
	f.node.Reconcile(ctx)
	if st := f.statuses["llm-1"]; st.Phase != v1.PodFailed || st.Reason != ReasonDispatchTimeout {
		t.Errorf("pod without a provider after 11 minutes: phase %q reason %q, want Failed %s", st.Phase, st.Reason, ReasonDispatchTimeout)
	}
	if st := f.statuses["llm-0"]; st.Phase == v1.PodFailed {
		t.Errorf("the dispatched pod was failed too: %s", st.Reason)
	}
}

func TestGarbageCollectionConfirmsWithTheAPIServer(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	// A workload for a pod that no longer exists, and one for a pod the
	// informer has not seen yet but the apiserver has.
	gone := provider.Workload{ID: provider.IDFor("uid-gone"), Node: "sluice-overflow", Phase: provider.Running, Ready: true,
		Pod: provider.PodRef{Namespace: "serve", Name: "gone", UID: "uid-gone"}}
	late := provider.Workload{ID: provider.IDFor("uid-late"), Node: "sluice-overflow", Phase: provider.Running, Ready: true,
		Pod: provider.PodRef{Namespace: "serve", Name: "late", UID: "uid-late"}}
	p.workloads[gone.ID], p.workloads[late.ID] = gone, late
	latePod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "late", UID: "uid-late"}, Spec: v1.PodSpec{NodeName: "sluice-overflow"}}
	if _, err := f.client.CoreV1().Pods("serve").Create(ctx, latePod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.node.Reconcile(ctx)
	if _, ok := p.workloads[gone.ID]; ok {
		t.Error("workload of a deleted pod was not collected")
	}
	if _, ok := p.workloads[late.ID]; !ok {
		t.Error("workload of a live pod missing from the informer was collected")
	}
}

// TestOnlyItsOwnWorkloads: a listed workload that does not name this node
// (another node's, or one with no node at all) is neither adopted nor
// collected, though no pod here runs it.
func TestOnlyItsOwnWorkloads(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	for _, node := range []string{"", "another-overflow"} {
		uid := types.UID("uid-of-" + node)
		w := provider.Workload{ID: provider.IDFor(uid), Node: node, Phase: provider.Running, Ready: true,
			Pod: provider.PodRef{Namespace: "serve", Name: "elsewhere", UID: uid}}
		p.workloads[w.ID] = w
	}
	f.node.Reconcile(ctx)
	f.node.Reconcile(ctx)
	if len(p.workloads) != 2 {
		t.Errorf("%d of 2 workloads not naming this node are left, want both (never collected)", len(p.workloads))
	}
}

func gpus(n *v1.Node) string {
	q := n.Status.Allocatable["nvidia.com/gpu"]
	return q.String()
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func TestShortfallAndQuota(t *testing.T) {
	capacity := applyQuota(v1.ResourceList{"nvidia.com/gpu": resource.MustParse("64"), "cpu": resource.MustParse("100")},
		v1.ResourceList{"nvidia.com/gpu": resource.MustParse("16"), "memory": resource.MustParse("1Ti")})
	want := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("16"), "cpu": resource.MustParse("100"), "memory": resource.MustParse("1Ti")}
	if diff := cmp.Diff(want.DeepCopy(), capacity, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("applyQuota (-want,+got):\n%s", diff)
	}
	used := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("15")}
	for _, tt := range []struct {
		name string
		want v1.ResourceList
		out  string
	}{
		{"fits", v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, ""},
		{"too many GPUs", v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}, "needs 2 nvidia.com/gpu, 1 free"},
		{"unreported ephemeral storage is unlimited", v1.ResourceList{"ephemeral-storage": resource.MustParse("1Ti")}, ""},
		{"unreported extended resource is absent", v1.ResourceList{"example.com/fpga": resource.MustParse("1")}, "needs 1 example.com/fpga, has none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := shortfall(capacity, used, tt.want); got != tt.out {
				t.Errorf("shortfall = %q, want %q", got, tt.out)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "apiVersion: overflow.sluice.dev/v1alpha1\nkind: OverflowNodeConfiguration\n"
	good := "providers:\n- name: east\n  type: kubernetes\n  kubernetes: {kubeconfig: " + kubeconfig + ", namespace: overflow}\n"
	for _, tt := range []struct {
		name, body, want string
	}{
		{"valid", head + good, ""},
		{"unknown field", head + "nodename: x\n" + good, `unknown field "nodename"`},
		{"no providers", head + "providers: []\n", "providers: Required value"},
		{"bad type", head + "providers:\n- {name: a, type: ftp}\n", `providers[0].type: Unsupported value: "ftp"`},
		{"missing kubeconfig", head + "providers:\n- name: a\n  type: kubernetes\n  kubernetes: {kubeconfig: /nonexistent, namespace: x}\n", "providers[0].kubernetes.kubeconfig: Invalid value: \"/nonexistent\""},
		{"http without url", head + "providers:\n- {name: a, type: http, http: {url: 'ftp://x'}}\n", "providers[0].http.url: Invalid value"},
		{"duplicate names", head + good + "- name: east\n  type: http\n  http: {url: 'https://x'}\n", "providers[1].name: Duplicate value: \"east\""},
		{"negative quota", head + "providers:\n- name: a\n  type: http\n  quota: {nvidia.com/gpu: '-1'}\n  http: {url: 'https://x'}\n", "providers[0].quota[nvidia.com/gpu]: Invalid value"},
		{"a namespace that is no name", head + "providers:\n- name: a\n  type: http\n  namespaces: [Team_A]\n  http: {url: 'https://x'}\n", "providers[0].namespaces[0]: Invalid value: \"Team_A\""},
		{"a token over plain http", head + "providers:\n- name: a\n  type: http\n  http: {url: 'http://x', tokenFile: " + kubeconfig + "}\n", "providers[0].http.tokenFile: Forbidden: a bearer token is sent only over https"},
		{"bad node name", head + "nodeName: Overflow_1\n" + good, "nodeName: Invalid value: \"Overflow_1\""},
		{"a duration of the old style", head + "reconcileInterval: 5s\n" + good, "reconcileInterval: 5s: renamed reconcileIntervalSeconds, in whole seconds"},
		{"a duration that is not positive", head + "dispatchTimeoutSeconds: 0\n" + good, "dispatchTimeoutSeconds: Invalid value: 0: must be a positive number of seconds"},
		{"wrong kind", "apiVersion: overflow.sluice.dev/v1alpha1\nkind: Node\n" + good, `kind: Unsupported value: "Node"`},
		{"kubelet API without address", head + "kubeletAPI: {clientCAFile: " + kubeconfig + "}\n" + good, "kubeletAPI.address: Invalid value: \"\""},
		{"kubelet API without client CA", head + "kubeletAPI: {address: 10.0.0.4}\n" + good, "kubeletAPI.clientCAFile: Required value"},
		{"kubelet API cert without key", head + "kubeletAPI: {address: 10.0.0.4, certFile: " + kubeconfig + ", clientCAFile: " + kubeconfig + "}\n" + good, "kubeletAPI.keyFile: Required value"},
		{"kubelet API bad port", head + "kubeletAPI: {address: 10.0.0.4, port: 70000, clientCAFile: " + kubeconfig + "}\n" + good, "kubeletAPI.port: Invalid value: 70000"},
		{"a leader lease past the node's grace period", head + "leaderElection: {leaseDurationSeconds: 45}\n" + good, "leaderElection.leaseDurationSeconds: Invalid value: 45: must be at most 30"},
		{"a renew deadline past the lease", head + "leaderElection: {leaseDurationSeconds: 15, renewDeadlineSeconds: 15}\n" + good, "leaderElection.leaseDurationSeconds: Invalid value: 15: must be greater than renewDeadlineSeconds"},
		{"a lease namespace that is no name", head + "leaderElection: {resourceNamespace: Sluice}\n" + good, "leaderElection.resourceNamespace: Invalid value: \"Sluice\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(file)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("LoadConfig: %v", err)
				}
				le := cfg.LeaderElection
				if cfg.NodeName != DefaultNodeName || cfg.ReconcileInterval() != DefaultReconcileInterval ||
					!*le.LeaderElect || le.ResourceName != "sluice-overflow-node-"+DefaultNodeName || *le.LeaseDurationSeconds != 15 {
					t.Errorf("defaults not applied: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadConfig error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestShippedConfig loads manifests/overflow-node/overflow-node.yaml, with
// its credential files pointed at temporary files.
func TestShippedConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "overflow-node", "overflow-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	body := strings.ReplaceAll(string(data), "/etc/sluice/providers", dir)
	body = strings.ReplaceAll(body, "/etc/sluice/kubelet-client-ca", dir)
	for _, f := range []string{"burst-east-kubeconfig", "gpu-cloud-token", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "overflow-node.yaml")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), "kubeletAPI.address") {
		t.Errorf("shipped configuration without --node-ip: error %v, want one naming kubeletAPI.address", err)
	}
	cfg, err := LoadConfig(file, WithNodeIP("10.4.0.7"))
	if err != nil {
		t.Fatalf("shipped configuration: %v", err)
	}
	if cfg.KubeletAPI == nil || cfg.KubeletAPI.Address != "10.4.0.7" || cfg.KubeletAPI.Port != 10250 {
		t.Errorf("shipped configuration: kubeletAPI %+v, want 10.4.0.7:10250", cfg.KubeletAPI)
	}
	if cfg.NodeName != DefaultNodeName || len(cfg.Providers) != 2 {
		t.Errorf("shipped configuration: node %s with %d providers", cfg.NodeName, len(cfg.Providers))
	}
}

func TestPodIPs(t *testing.T) {
	for _, tt := range []struct {
		addresses []string
		want      []string
	}{
		{nil, nil},
		{[]string{"10.0.0.1", "fd00::1"}, []string{"10.0.0.1", "fd00::1"}},
		{[]string{"host.example", "127.0.0.1", "169.254.1.1", "fe80::1", "0.0.0.0", "10.0.0.2"}, []string{"10.0.0.2"}},
		{[]string{"10.0.0.1", "10.0.0.2"}, []string{"10.0.0.1"}},
	} {
		var got []string
		for _, ip := range podIPs(tt.addresses) {
			got = append(got, ip.IP)
		}
		if !cmp.Equal(got, tt.want) {
			t.Errorf("podIPs(%v) = %v, want %v", tt.addresses, got, tt.want)
		}
	}
}

func TestLogOptions(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	o, err := logOptions(url.Values{"tailLines": {"5"}, "follow": {"true"}, "sinceSeconds": {"60"}, "limitBytes": {"100"}}, now)
	if err != nil || o.Tail != 5 || !o.Follow || !o.Since.Equal(now.Add(-time.Minute)) || o.LimitBytes != 100 {
		t.Errorf("logOptions = %+v, %v", o, err)
	}
	for q, want := range map[string]string{"tailLines=x": "tailLines", "follow=maybe": "follow", "sinceTime=yesterday": "sinceTime", "limitBytes=0": "limitBytes"} {
		v, _ := url.ParseQuery(q)
		if _, err := logOptions(v, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("logOptions(%s) = %v, want an error naming %s", q, err, want)
		}
	}
}

// TestContainerLogs: the kubelet API's log handler streams the provider's
// log of a pod it runs, names what is wrong (a pod not here, a container
// the pod has not), returns nothing for tailLines=0, and gives up on a
// provider that does not answer within the request timeout.
func TestContainerLogs(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, p))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.node.cfg.RequestTimeoutSeconds = ptr.To[int64](1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", f.node.containerLogs)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	c := pod.Spec.Containers[0].Name
	base := "/containerLogs/" + pod.Namespace + "/"
	if code, body := get(base + "llm-0/" + c + "?tailLines=3&follow=true"); code != 200 || body != provider.IDFor(pod.UID)+"/"+c+" tail=3 follow=true\n" {
		t.Errorf("logs: %d %q", code, body)
	}
	if code, body := get(base + "llm-0/" + c + "?tailLines=0"); code != 200 || body != "" {
		t.Errorf("logs --tail=0: %d %q, want nothing", code, body)
	}
	if code, body := get(base + "nope/" + c); code != 404 || !strings.Contains(body, "is not on node") {
		t.Errorf("logs of a pod not here: %d %q", code, body)
	}
	if code, body := get(base + "llm-0/other"); code != 400 || !strings.Contains(body, "container other is not valid") {
		t.Errorf("logs of an unknown container: %d %q", code, body)
	}
	if code, body := get(base + "llm-0/" + c + "?tailLines=x"); code != 400 || !strings.Contains(body, "tailLines") {
		t.Errorf("logs with a bad tailLines: %d %q", code, body)
	}
	p.set(func(f *fakeProvider) { f.logsHang = true })
	if code, body := get(base + "llm-0/" + c); code != http.StatusGatewayTimeout || !strings.Contains(body, "did not answer within") {
		t.Errorf("logs from a provider that hangs: %d %q, want 504", code, body)
	}
}

// TestMeterGPUTimeAndCost: each reconcile counts the GPU-seconds of the
// pods running at each provider since the last one, and their cost at the
// provider's price; a pod pending at its provider is not counted.
func TestMeterGPUTimeAndCost(t *testing.T) {
	a, b := newFake("8"), newFake("8")
	f := newFixture(t, member("meter-a", 0, 3.6, a), member("meter-b", 1, 7.2, b))
	ctx := context.Background()
	before := func(provider string) (float64, float64) {
		s, err := testutil.GetCounterMetricValue(metrics.OverflowGPUSeconds.WithLabelValues(provider))
		if err != nil {
			t.Fatal(err)
		}
		c, err := testutil.GetCounterMetricValue(metrics.OverflowCost.WithLabelValues(provider))
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	metrics.RegisterOverflowNode()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 2)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	id := provider.IDFor(pod.UID)
	a.set(func(p *fakeProvider) {
		w := p.workloads[id]
		w.Phase, w.Ready = provider.Pending, false
		p.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	s0, c0 := before("meter-a")
	f.clock = f.clock.Add(time.Minute)
	f.node.Reconcile(ctx) // pending for that minute: nothing counted
	if s, _ := before("meter-a"); s != s0 {
		t.Errorf("a pod pending at its provider was metered: %v GPU-seconds", s-s0)
	}
	a.set(func(p *fakeProvider) {
		w := p.workloads[id]
		w.Phase, w.Ready = provider.Running, true
		p.workloads[id] = w
	})
	f.node.Reconcile(ctx)
	s1, c1 := before("meter-a")
	f.clock = f.clock.Add(30 * time.Minute)
	f.node.Reconcile(ctx)
	s2, c2 := before("meter-a")
	if got, want := s2-s1, 2*1800.0; got != want {
		t.Errorf("2 GPUs running for 30 minutes: %v GPU-seconds, want %v", got, want)
	}
	if got, want := c2-c1, 3.6; math.Abs(got-want) > 1e-9 {
		t.Errorf("1 GPU-hour at 3.6 per GPU-hour: cost %v, want %v", got, want)
	}
	if c1 != c0 {
		t.Errorf("cost counted before the pod ran: %v", c1-c0)
	}
	if s, _ := before("meter-b"); s != 0 {
		t.Errorf("provider meter-b ran nothing and has %v GPU-seconds", s)
	}
}

// TestRemoteStartObserved: the time from creating a pod's workload at its
// provider to the provider reporting it Ready is observed once, when a
// listing first finds it Ready.
func TestRemoteStartObserved(t *testing.T) {
	p := newFake("8")
	f := newFixture(t, member("start-cloud", 0, 0, p))
	ctx := context.Background()
	metrics.RegisterOverflowNode()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1)
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	id := provider.IDFor(pod.UID)
	hist := metrics.RemoteStart.WithLabelValues("start-cloud", "cold")
	set := func(ready bool) {
		p.set(func(fp *fakeProvider) {
			w := fp.workloads[id]
			w.Phase, w.Ready = provider.Running, ready
			fp.workloads[id] = w
		})
	}
	set(false)
	f.clock = f.clock.Add(30 * time.Second)
	f.node.Reconcile(ctx)
	set(true)
	f.clock = f.clock.Add(60 * time.Second)
	f.node.Reconcile(ctx)
	f.clock = f.clock.Add(60 * time.Second)
	f.node.Reconcile(ctx) // still Ready: not observed again
	count, err := testutil.GetHistogramMetricCount(hist)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := testutil.GetHistogramMetricValue(hist)
	if err != nil {
		t.Fatal(err)
	}
	if count != 1 || sum != 90 {
		t.Errorf("remote start observed %d times, %v s in all; want once, 90 s (created, Ready 90 s later)", count, sum)
	}
}

// TestProviderNamespacesAreHonoured: a provider that names its namespaces
// never gets a pod of another (nor its Secrets): the pod goes to a
// provider that may run it, and fails when none may; the node's offer
// says so, for the scheduler.
func TestProviderNamespacesAreHonoured(t *testing.T) {
	only, any := newFake("8"), newFake("8")
	onlyMember := member("only-team-a", 0, 0, only)
	onlyMember.Config.Namespaces = []string{"team-a"}
	f := newFixture(t, onlyMember, member("any", 1, 0, any))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	pod := f.addPod(t, "llm-0", 1) // namespace serve
	if err := f.node.CreatePod(ctx, pod); err != nil {
		t.Fatalf("CreatePod: %v", err)
	}
	if got := dispatchedTo(f.pod(t, "llm-0")); got != "any" {
		t.Errorf("a pod of namespace serve went to %q, want any (only-team-a runs team-a's)", got)
	}
	if only.creates != 0 {
		t.Errorf("the provider of team-a was asked to create a pod of serve")
	}
	var published []string
	for _, n := range f.nodes {
		o, err := offer.Of(n, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range o.Providers {
			if p.Name == "only-team-a" {
				published = p.Namespaces
			}
		}
	}
	if strings.Join(published, ",") != "team-a" {
		t.Errorf("the node's offer gives only-team-a the namespaces %v, want [team-a]", published)
	}
}

// fakeBudgets lets allow pods go, says unpaced ones have no budget, and
// keeps the rest waiting.
type fakeBudgets struct {
	allow   int
	unpaced map[string]string
	evicted []string
	idle    int
	// deleting marks an evicted pod deleting, as the Eviction API does.
	deleting func(*v1.Pod)
}

func (b *fakeBudgets) Retire(_ context.Context, pod *v1.Pod, _ string) (retirement, string, error) {
	if why, ok := b.unpaced[pod.Name]; ok {
		return unpaced, why, nil
	}
	if b.allow > 0 {
		b.allow--
		b.evicted = append(b.evicted, pod.Name)
		b.deleting(pod)
		return evicted, "PodDisruptionBudget llm", nil
	}
	return waiting, "PodDisruptionBudget llm allows no more now", nil
}

func (b *fakeBudgets) Idle() { b.idle++ }

// TestGoneProviderPodsLeaveAsBudgetsAllow: a provider not listed for the
// failure timeout is gone; its pods are retired through their budgets, one
// as the budget allows, the next waiting (said once in an Event), and a
// pod no budget paces is failed; the node says the provider is gone.
func TestGoneProviderPodsLeaveAsBudgetsAllow(t *testing.T) {
	a := newFake("8")
	f := newFixture(t, member("a", 0, 0, a))
	budgets := &fakeBudgets{allow: 1, unpaced: map[string]string{"bare": "it has no controller: nothing would replace it"},
		deleting: func(pod *v1.Pod) {
			p := f.pod(t, pod.Name).DeepCopy()
			p.DeletionTimestamp = &metav1.Time{Time: f.clock}
			if err := f.pods.Update(p); err != nil {
				t.Fatal(err)
			}
		}}
	f.node.budgets = budgets
	ctx := context.Background()
	f.node.Reconcile(ctx)
	for _, name := range []string{"llm-0", "llm-1", "bare"} {
		if err := f.node.CreatePod(ctx, f.addPod(t, name, 1)); err != nil {
			t.Fatal(err)
		}
	}
	f.node.Reconcile(ctx)
	if budgets.idle == 0 {
		t.Errorf("budgets not told they are idle while no provider is gone")
	}
	a.set(func(f *fakeProvider) { f.down = errors.New("connection refused") })
	f.node.Reconcile(ctx)
	if len(budgets.evicted) != 0 {
		t.Fatalf("evicted %v before the failure timeout", budgets.evicted)
	}
	f.clock = f.clock.Add(DefaultProviderFailureTimeout)
	f.node.Reconcile(ctx)
	f.node.Reconcile(ctx)
	if len(budgets.evicted) != 1 {
		t.Errorf("evicted %v, want one pod: the budget allowed one", budgets.evicted)
	}
	for _, name := range []string{"llm-0", "llm-1"} {
		if st := f.statuses[name]; st.Phase == v1.PodFailed {
			t.Errorf("%s failed (%s), want it evicted or waiting for its budget", name, st.Reason)
		}
	}
	if st := f.statuses["bare"]; st.Phase != v1.PodFailed || st.Reason != ReasonProviderUnavailable || !strings.Contains(st.Message, "no budget paces it: it has no controller") {
		t.Errorf("bare pod: %s %s %q, want Failed %s saying no budget paces it", st.Phase, st.Reason, st.Message, ReasonProviderUnavailable)
	}
	var gone, waits, nodeGone int
	for len(f.node.recorder.(*record.FakeRecorder).Events) > 0 {
		e := <-f.node.recorder.(*record.FakeRecorder).Events
		switch {
		case strings.Contains(e, ReasonProviderGone+" provider a could not be listed for 2m0s: its 3 pods"):
			nodeGone++
		case strings.Contains(e, ReasonProviderGone) && strings.Contains(e, "waiting: PodDisruptionBudget llm allows no more now"):
			waits++
		case strings.Contains(e, ReasonProviderGone) && strings.Contains(e, "evicted, as PodDisruptionBudget llm allows"):
			gone++
		}
	}
	if nodeGone != 1 || gone != 1 || waits != 1 {
		t.Errorf("Events: %d on the node, %d evicted, %d waiting (over two reconciles); want 1, 1, 1", nodeGone, gone, waits)
	}
}

// TestNewLeaderKeepsAGoneProvidersClock: the node publishes when a
// provider's listing began to fail; a new leader (or a restart) reading
// it retires the provider's pods once that moment is
// providerFailureTimeoutSeconds old, not that long after its own start.
func TestNewLeaderKeepsAGoneProvidersClock(t *testing.T) {
	a := newFake("8")
	old := newFixture(t, member("a", 0, 0, a))
	ctx := context.Background()
	old.node.Reconcile(ctx)
	if err := old.node.CreatePod(ctx, old.addPod(t, "llm-0", 1)); err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeProvider) { f.down = errors.New("connection refused") })
	old.node.Reconcile(ctx)
	published := old.nodes[len(old.nodes)-1]
	if o, err := offer.Of(published, true); err != nil || o.Providers[0].UnlistedSince == nil || !o.Providers[0].UnlistedSince.Time.Equal(old.clock) {
		t.Fatalf("published offer %v (%v): want provider a unlisted since %v", o, err, old.clock)
	}

	// The new leader starts a minute before the timeout ends.
	next := newFixture(t, member("a", 0, 0, a))
	next.clock = old.clock.Add(DefaultProviderFailureTimeout - time.Minute)
	if err := next.pods.Add(old.pod(t, "llm-0")); err != nil {
		t.Fatal(err)
	}
	budgets := &fakeBudgets{allow: 1, deleting: func(*v1.Pod) {}}
	next.node.budgets = budgets
	next.node.resume(published)
	next.node.Reconcile(ctx)
	if len(budgets.evicted) != 0 {
		t.Fatalf("evicted %v a minute before the timeout", budgets.evicted)
	}
	next.clock = next.clock.Add(time.Minute)
	next.node.Reconcile(ctx)
	if len(budgets.evicted) != 1 {
		t.Errorf("evicted %v once the published outage is providerFailureTimeoutSeconds old, want llm-0", budgets.evicted)
	}
}
