// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// fakeClaims is a ClaimSource the test edits.
type fakeClaims struct {
	mu   sync.Mutex
	list []*v1alpha1.ResearchClaim
	// unread: the claims cannot be read (the API not served, or RBAC).
	unread bool
}

func (f *fakeClaims) Served() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.unread
}

func (f *fakeClaims) List() []*v1alpha1.ResearchClaim {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*v1alpha1.ResearchClaim, len(f.list))
	for i, c := range f.list {
		out[i] = c.DeepCopy()
	}
	return out
}

func (f *fakeClaims) edit(fn func(c *v1alpha1.ResearchClaim)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.list {
		fn(c)
	}
}

// servingPod is a pod of ReplicaSet rs (template hash), one GPU, bound to
// node.
func servingPod(name, rs, hash, node string) *v1.Pod {
	q := resource.MustParse("1")
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{"pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("uid-" + rs), Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "img",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}, Limits: v1.ResourceList{"nvidia.com/gpu": q}}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

// victimsClaim is a live make-before-break claim moving victims to the
// overflow node's provider cloud.
func victimsClaim(victims ...*v1.Pod) *v1alpha1.ResearchClaim {
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "claim"}}
	c.Spec.MakeBeforeBreak = true
	for _, p := range victims {
		ref := metav1.GetControllerOf(p)
		c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.Spec.NodeName,
			Owner: v1alpha1.Owner{Kind: ref.Kind, Name: ref.Name, UID: ref.UID}, Target: v1alpha1.Target{Node: "sluice-overflow", Provider: "cloud"},
			Requests: p.Spec.Containers[0].Resources.Requests, TemplateHash: p.Labels["pod-template-hash"]})
	}
	c.Status.Phase = v1alpha1.PhaseEvicting
	return c
}

func (f *fixture) warmCondition(t *testing.T, name string) string {
	t.Helper()
	p, err := f.client.CoreV1().Pods("serve").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return condition(p.Status, offer.WarmCondition)
}

// TestWarmInstances: the node starts a warm instance for each victim of a
// make-before-break claim and reports it on the victim; the replacement
// of an evicted victim (same controller and template hash) adopts it
// without a second create, a pod of another template does not; a
// restarted node deletes the warm instances of a claim given up, keeps the
// adopted one, and deletes one not adopted within the TTL, telling its
// victim, without starting it again.
func TestWarmInstances(t *testing.T) {
	cloud := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, cloud))
	ctx := context.Background()
	v0, v1p := servingPod("llm-0", "llm", "h1", "gpu-1"), servingPod("llm-1", "llm", "h1", "gpu-1")
	for _, p := range []*v1.Pod{v0, v1p} {
		if _, err := f.client.CoreV1().Pods("serve").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := &fakeClaims{list: []*v1alpha1.ResearchClaim{victimsClaim(v0, v1p)}}
	f.node.SetClaims(src)

	f.node.Reconcile(ctx)
	if cloud.creates != 2 {
		t.Fatalf("%d creates at the provider, want a warm instance per victim", cloud.creates)
	}
	if got := f.warmCondition(t, "llm-0"); !strings.HasPrefix(got, "False:WarmStarting:warm instance sluice-warm-uid-llm-0 created at provider cloud") {
		t.Errorf("victim's warm condition after the start = %q", got)
	}
	f.node.Reconcile(ctx)
	if got := f.warmCondition(t, "llm-0"); got != "True:WarmReady:warm instance sluice-warm-uid-llm-0 at provider cloud is Ready" {
		t.Errorf("victim's warm condition once Ready = %q", got)
	}

	// llm-0 is evicted; its replacement, bound here, adopts its instance.
	if err := f.client.CoreV1().Pods("serve").Delete(ctx, "llm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	src.edit(func(c *v1alpha1.ResearchClaim) {
		c.Status.Evicted = []v1alpha1.Eviction{{UID: v0.UID, Time: metav1.NewTime(f.clock)}}
	})
	for _, p := range []*v1.Pod{servingPod("llm-new", "llm", "h1", "sluice-overflow"), servingPod("llm-other", "llm", "h2", "sluice-overflow")} {
		p.Status.Phase = v1.PodPending
		if err := f.pods.Add(p); err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.CoreV1().Pods("serve").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.node.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if cloud.creates != 3 {
		t.Errorf("%d creates, want 3: the replacement adopted, the pod of another template created", cloud.creates)
	}
	w := cloud.workloads["sluice-warm-uid-llm-0"]
	if w.Pod.UID != "uid-llm-new" {
		t.Errorf("warm instance of llm-0 runs %s, want the replacement uid-llm-new", w.Pod)
	}
	st := f.statuses["llm-new"]
	if condition(st, v1.PodReady) != "True::" || condition(st, RemoteCondition) != "True:cloud:runs as sluice-warm-uid-llm-0 at provider cloud" {
		t.Errorf("adopter's status: Ready %q, remote %q", condition(st, v1.PodReady), condition(st, RemoteCondition))
	}
	if _, ok := cloud.workloads["sluice-warm-uid-llm-1"]; !ok {
		t.Error("the warm instance of llm-1 (not evicted) was taken")
	}
	f.node.Reconcile(ctx)
	if _, ok := cloud.workloads["sluice-warm-uid-llm-0"]; !ok {
		t.Fatal("the adopted warm instance was collected")
	}

	// A restarted node: the claim has been given up meanwhile.
	src.edit(func(c *v1alpha1.ResearchClaim) { c.Status.Phase = v1alpha1.PhaseGivenUp })
	restarted := New(f.node.cfg, f.node.members, f.client, corelisters.NewPodLister(f.pods), record.NewFakeRecorder(100))
	restarted.now = func() time.Time { return f.clock }
	restarted.NotifyPods(ctx, func(*v1.Pod) {})
	restarted.SetClaims(src)
	restarted.Reconcile(ctx)
	if _, ok := cloud.workloads["sluice-warm-uid-llm-1"]; ok {
		t.Error("the warm instance of a claim given up survived a restart")
	}
	if w := cloud.workloads["sluice-warm-uid-llm-0"]; w.Pod.UID != "uid-llm-new" {
		t.Errorf("after the restart the adopted instance runs %q, want uid-llm-new", w.Pod.UID)
	}

	// A new claim's warm instance nobody adopts expires.
	v2 := servingPod("llm-2", "llm", "h1", "gpu-1")
	if _, err := f.client.CoreV1().Pods("serve").Create(ctx, v2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	src.list = []*v1alpha1.ResearchClaim{victimsClaim(v2)}
	src.mu.Unlock()
	restarted.Reconcile(ctx)
	creates := cloud.creates
	if _, ok := cloud.workloads["sluice-warm-uid-llm-2"]; !ok {
		t.Fatal("no warm instance for llm-2")
	}
	clock := f.clock.Add(DefaultWarmTTL)
	restarted.now = func() time.Time { return clock }
	restarted.Reconcile(ctx)
	restarted.Reconcile(ctx)
	if _, ok := cloud.workloads["sluice-warm-uid-llm-2"]; ok || cloud.creates != creates {
		t.Errorf("warm instance of llm-2 after its TTL: present %v, creates %d (want gone, %d)", ok, cloud.creates, creates)
	}
	if got := f.warmCondition(t, "llm-2"); !strings.HasPrefix(got, "False:WarmExpired:") {
		t.Errorf("victim's warm condition after the TTL = %q, want WarmExpired", got)
	}
}

// TestWarmInstanceOutlivesItsClaim: the claim ends (its research bound)
// after its victim is evicted but before the replacement reaches the
// node; the warm instance is kept for the replacement, which adopts it.
// One whose victim still runs when its claim ends is deleted.
func TestWarmInstanceOutlivesItsClaim(t *testing.T) {
	cloud := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, cloud))
	ctx := context.Background()
	evicted, stays := servingPod("llm-0", "llm", "h1", "gpu-1"), servingPod("llm-1", "llm", "h1", "gpu-1")
	for _, p := range []*v1.Pod{evicted, stays} {
		if _, err := f.client.CoreV1().Pods("serve").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src := &fakeClaims{list: []*v1alpha1.ResearchClaim{victimsClaim(evicted, stays)}}
	f.node.SetClaims(src)
	f.node.Reconcile(ctx)
	if err := f.client.CoreV1().Pods("serve").Delete(ctx, "llm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	src.list = nil
	src.mu.Unlock()
	f.node.Reconcile(ctx)
	if _, ok := cloud.workloads["sluice-warm-uid-llm-1"]; ok {
		t.Error("the warm instance of a victim that still runs survived its claim")
	}
	if _, ok := cloud.workloads["sluice-warm-uid-llm-0"]; !ok {
		t.Fatal("the warm instance of an evicted victim was deleted with its claim, before its replacement came")
	}
	r := servingPod("llm-new", "llm", "h1", "sluice-overflow")
	r.Status.Phase = v1.PodPending
	if err := f.pods.Add(r); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Pods("serve").Create(ctx, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.node.CreatePod(ctx, r); err != nil {
		t.Fatal(err)
	}
	if w := cloud.workloads["sluice-warm-uid-llm-0"]; w.Pod.UID != r.UID || cloud.creates != 2 {
		t.Errorf("replacement: warm instance runs %q, %d creates; want it adopted, 2 creates", w.Pod.UID, cloud.creates)
	}
}

// TestWarmInstanceNeedsNoIdentity: a victim whose env reads its own name
// gets no warm instance (the adopter would run with the victim's name);
// it is told so, finally, and moves without one.
func TestWarmInstanceNeedsNoIdentity(t *testing.T) {
	cloud := newFake("8")
	f := newFixture(t, member("cloud", 0, 0, cloud))
	ctx := context.Background()
	v := servingPod("llm-0", "llm", "h1", "gpu-1")
	v.Spec.Containers[0].Env = []v1.EnvVar{{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	if _, err := f.client.CoreV1().Pods("serve").Create(ctx, v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.node.SetClaims(&fakeClaims{list: []*v1alpha1.ResearchClaim{victimsClaim(v)}})
	f.node.Reconcile(ctx)
	f.node.Reconcile(ctx)
	if cloud.creates != 0 {
		t.Errorf("%d creates, want none", cloud.creates)
	}
	if got := f.warmCondition(t, "llm-0"); got != "False:WarmFailed:container c env POD_NAME reads metadata.name: a warm instance would keep this pod's after its replacement adopts it" {
		t.Errorf("warm condition = %q", got)
	}
}

// TestWarmInstanceMeteredAndExpiresWithoutClaims: a warm instance running
// at a provider is metered like a pod (GPU-seconds, cost); while the node
// cannot read claims it still expires at its own deadline, never started
// again.
func TestWarmInstanceMeteredAndExpiresWithoutClaims(t *testing.T) {
	cloud := newFake("8")
	f := newFixture(t, member("warm-meter", 0, 3.6, cloud))
	ctx := context.Background()
	metrics.RegisterOverflowNode()
	victim := servingPod("llm-0", "llm", "h1", "gpu-1")
	if _, err := f.client.CoreV1().Pods("serve").Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := victimsClaim(victim)
	claim.Spec.Victims[0].Target.Provider = "warm-meter"
	src := &fakeClaims{list: []*v1alpha1.ResearchClaim{claim}}
	f.node.SetClaims(src)
	f.node.Reconcile(ctx)
	f.node.Reconcile(ctx) // Running
	if cloud.creates != 1 {
		t.Fatalf("%d creates, want the victim's warm instance", cloud.creates)
	}
	seconds := func() float64 {
		v, err := testutil.GetCounterMetricValue(metrics.OverflowGPUSeconds.WithLabelValues("warm-meter"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	was := seconds()
	f.clock = f.clock.Add(10 * time.Second)
	f.node.Reconcile(ctx)
	if got := seconds() - was; got != 10 {
		t.Errorf("a 1-GPU warm instance running 10 s metered %v GPU-seconds, want 10", got)
	}

	src.mu.Lock()
	src.unread = true
	src.mu.Unlock()
	f.clock = f.clock.Add(DefaultWarmTTL)
	f.node.Reconcile(ctx)
	f.node.Reconcile(ctx)
	cloud.mu.Lock()
	left, creates := len(cloud.workloads), cloud.creates
	cloud.mu.Unlock()
	if left != 0 || creates != 1 {
		t.Errorf("claims unreadable, past the warm TTL: %d workloads left, %d creates; want 0 left (expired), 1 create", left, creates)
	}
}
