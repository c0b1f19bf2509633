// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/test/harness"
)

// pinned limits a Deployment's pods to nodes and the overflow node (so
// a test decides where production runs, and replacements can only go to
// the overflow node), and labels them budget=<budget> when budget is set.
func pinned(d *appsv1.Deployment, overflowNode, budget string, nodes ...string) *appsv1.Deployment {
	d.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: append(append([]string(nil), nodes...), overflowNode),
		}}}},
	}}}
	if budget != "" {
		d.Spec.Template.Labels["budget"] = budget
	}
	return d
}

// budgetOver is a PodDisruptionBudget name over the pods labelled
// budget=<label>.
func budgetOver(ns, name, label string, maxUnavailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
	pdb := harness.PDB(ns, name, maxUnavailable)
	pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"budget": label}}
	return pdb
}

// createPDB creates a PodDisruptionBudget and waits until the disruption
// controller has processed it (by then informers watching budgets, the
// scheduler's too, have it).
func createPDB(t *testing.T, cp *harness.ControlPlane, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		got, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration >= got.Generation, nil
	}, func() string { return "PodDisruptionBudget " + pdb.Name + " processed by the disruption controller" })
}

func researchPod(t *testing.T, cp *harness.ControlPlane, ns, name string, gpus int) {
	t.Helper()
	harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").PriorityClass("research").GPUs(gpus).Obj())
}

// claimsOf lists the ResearchClaims of a namespace.
func claimsOf(t *testing.T, cp *harness.ControlPlane, ns string) []v1alpha1.ResearchClaim {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(v1alpha1.Resource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]v1alpha1.ResearchClaim, len(list.Items))
	for i := range list.Items {
		c, err := v1alpha1.FromUnstructured(list.Items[i].Object)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = *c
	}
	return out
}

// waitClaim waits until the namespace's one claim satisfies cond.
func waitClaim(t *testing.T, cp *harness.ControlPlane, ns, what string, cond func(*v1alpha1.ResearchClaim) bool) v1alpha1.ResearchClaim {
	t.Helper()
	var last []v1alpha1.ResearchClaim
	harness.Eventually(t, 2*harness.DefaultTimeout, func(context.Context) (bool, error) {
		last = claimsOf(t, cp, ns)
		return len(last) == 1 && cond(&last[0]), nil
	}, func() string {
		var s []string
		for _, c := range last {
			s = append(s, fmt.Sprintf("%s: %s %q (%d evicted, %d replaced)", c.Name, c.Status.Phase, c.Status.Message, len(c.Status.Evicted), len(c.Status.Replaced)))
		}
		return fmt.Sprintf("claim %s; claims: %v", what, s)
	})
	return last[0]
}

// evictions records the production pods evicted (the DisruptionTarget
// condition the Eviction API sets), in order, with their nodes.
type evictions struct {
	mu    sync.Mutex
	nodes []string
	names []string
	hook  func(pod *v1.Pod)
}

func watchEvictions(t *testing.T, cp *harness.ControlPlane, ns string) *evictions {
	t.Helper()
	ev := &evictions{}
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		if e.New == nil || !disruptionTarget(e.New) || (e.Old != nil && disruptionTarget(e.Old)) {
			return
		}
		ev.mu.Lock()
		ev.nodes = append(ev.nodes, e.New.Spec.NodeName)
		ev.names = append(ev.names, e.New.Name)
		hook := ev.hook
		ev.mu.Unlock()
		if hook != nil {
			hook(e.New)
		}
	})
	return ev
}

func (e *evictions) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.names)
}

func (e *evictions) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.names...)
}

func (e *evictions) onNodes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.nodes...)
}

func disruptionTarget(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestTwoBudgetsNeverVictims: a pod selected by two PodDisruptionBudgets
// (which the Eviction API refuses with 500 every time) is never planned
// as a victim though it comes first by name: research takes the node of
// a movable pod, and the next research pod is told which budgets block.
func TestTwoBudgetsNeverVictims(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "tb", 1, 2, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "twice", 1, 8), "tb-overflow", "twice", nodes[0]), nil)
	createPDB(t, cp, budgetOver(ns, "twice-a", "twice", intstr.FromInt32(1)))
	createPDB(t, cp, budgetOver(ns, "twice-b", "twice", intstr.FromInt32(1)))
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "movable", 1, 8), "tb-overflow", "", nodes[1]), harness.PDB(ns, "movable", intstr.FromInt32(1)))
	waitPlaced(t, cp, ns, "twice", 1, func(n string) bool { return n == nodes[0] }, "on "+nodes[0])
	waitPlaced(t, cp, ns, "movable", 1, func(n string) bool { return n == nodes[1] }, "on "+nodes[1])
	inv := harness.WatchInvariants(t, cp, ns, 64)
	ev := watchEvictions(t, cp, ns)
	inv.Arm()

	researchPod(t, cp, ns, "train-1", 8)
	if node := harness.WaitForPodsBound(t, cp.Client, ns, "train-1")["train-1"]; node != nodes[1] {
		t.Fatalf("research took %s, want %s (the movable pod's)", node, nodes[1])
	}
	stop := harness.ExpectNeverBound(t, cp.Client, ns, "train-2")
	researchPod(t, cp, ns, "train-2", 8)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train-2", "NoOverflowClaim", "selected by 2 PodDisruptionBudgets", "twice-a, twice-b")
	stop()
	for _, name := range ev.list() {
		if strings.HasPrefix(name, "twice") {
			t.Errorf("%s, under two budgets, was evicted", name)
		}
	}
}

// TestEvictionsRefusedClaimEnds: with the disruption controller down, a
// budget whose status the lister still shows allowing a disruption is
// refused by the Eviction API (429, its status out of date). The claim
// does not live forever: it is given up at its timeout, the research pod
// is told why in numbers, and no new claim is planned before the backoff.
func TestEvictionsRefusedClaimEnds(t *testing.T) {
	harness.WithoutDisruptionController(t)
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "er", 1, 1, 1, 64, false)
	startSchedulerWith(t, cp, 600, &configv1.ClaimsConfig{WaveTimeoutSeconds: ptr.To[int64](10), RetryBackoffSeconds: ptr.To[int64](600)})
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 2, 4), "er-overflow", "", nodes[0]), harness.PDB(ns, "serve", intstr.FromInt32(1)))
	waitPlaced(t, cp, ns, "serve", 2, func(n string) bool { return n == nodes[0] }, "on "+nodes[0])
	// The status a disruption controller would have written, then stopped
	// at: one disruption allowed, for a generation before the current one.
	pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "serve", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation - 1, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(context.Background(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()

	stop := harness.ExpectNeverBound(t, cp.Client, ns, "train")
	defer stop()
	researchPod(t, cp, ns, "train", 8)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train", "ClaimGivenUp", "0 of 2 production pods moved", "PodDisruptionBudget serve")
	c := waitClaim(t, cp, ns, "given up", func(c *v1alpha1.ResearchClaim) bool { return c.Status.Phase == v1alpha1.PhaseGivenUp })
	if c.Status.RetryAfter == nil {
		t.Errorf("given-up claim has no retryAfter")
	}
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train", "NoOverflowClaim", "no new claim before")
	// The claim given up holds no node: the research pod's nomination goes.
	harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "train", metav1.GetOptions{})
		return err == nil && p.Status.NominatedNodeName == "", nil
	}, func() string { return "the research pod's nomination released after the claim was given up" })
	if n := inv.Evictions()["production"]; n != 0 {
		t.Errorf("%d production pods evicted under a refused budget", n)
	}
}

// TestConcurrentClaimsShareRoom: two gangs claim at once, each wanting a
// leaf of production (16 GPUs) moved, with 16 GPUs of overflow room. The
// ledger counts the first claim's victims against the room, so the second
// evicts nothing: production is never evicted beyond the room.
func TestConcurrentClaimsShareRoom(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "cs", 1, 2, 2, 16, false)
	startScheduler(t, cp, 600)
	for i, n := range nodes {
		name := fmt.Sprintf("p%d", i)
		harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, name, 1, 8), "cs-overflow", "", n), harness.PDB(ns, name, intstr.FromInt32(1)))
		waitPlaced(t, cp, ns, name, 1, func(node string) bool { return node == n }, "on "+n)
	}
	inv := harness.WatchInvariants(t, cp, ns, 16)
	inv.Arm()
	a := researchGang(t, cp, ns, "ga", 2, 8)
	b := researchGang(t, cp, ns, "gb", 2, 8)
	var bound, waiting []string
	harness.Eventually(t, 2*harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		bound, waiting = nil, nil
		for _, g := range [][]string{a, b} {
			n := 0
			for _, name := range g {
				p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil && p.Spec.NodeName != "" {
					n++
				}
			}
			if n == len(g) {
				bound = append(bound, g[0])
			} else {
				waiting = append(waiting, g[0])
			}
		}
		return len(bound) == 1, nil
	}, func() string { return fmt.Sprintf("one gang bound; bound %v, waiting %v", bound, waiting) })
	harness.WaitForEvent(t, cp.Client, ns, "Pod", waiting[0], "NoOverflowClaim", "no room")
	if n := inv.Evictions()["production"]; n != 2 {
		t.Errorf("%d production pods evicted for one leaf of 2 nodes, want 2", n)
	}
	harness.CheckGangsAtRest(t, inv)
}

// TestProtectedDomainNotPlanned: a leaf whose fewest victims include pods
// under maxUnavailable: 0 is never chosen; research takes the leaf that
// can be freed (more victims, all movable), and a second gang, for which
// no leaf can be freed, is told which budget and which pods block it.
func TestProtectedDomainNotPlanned(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "pd", 1, 2, 2, 256, false)
	startScheduler(t, cp, 600)
	// Leaf 0: each node a frozen 4-GPU pod (maxUnavailable 0) and a
	// movable one. Leaf 1: each node eight movable 1-GPU pods.
	for i, n := range nodes[:2] {
		harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, fmt.Sprintf("frozen-%d", i), 1, 4), "pd-overflow", "frozen", n), nil)
		harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, fmt.Sprintf("lite-%d", i), 1, 4), "pd-overflow", "", n), nil)
	}
	createPDB(t, cp, budgetOver(ns, "frozen", "frozen", intstr.FromInt32(0)))
	for i, n := range nodes[2:] {
		harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, fmt.Sprintf("many-%d", i), 8, 1), "pd-overflow", "", n), nil)
	}
	for i, n := range nodes[:2] {
		on := func(node string) bool { return node == n }
		waitPlaced(t, cp, ns, fmt.Sprintf("frozen-%d", i), 1, on, "on "+n)
		waitPlaced(t, cp, ns, fmt.Sprintf("lite-%d", i), 1, on, "on "+n)
	}
	for i, n := range nodes[2:] {
		waitPlaced(t, cp, ns, fmt.Sprintf("many-%d", i), 8, func(node string) bool { return node == n }, "on "+n)
	}
	inv := harness.WatchInvariants(t, cp, ns, 256)
	ev := watchEvictions(t, cp, ns)
	inv.Arm()

	gang := researchGang(t, cp, ns, "train", 2, 8)
	bound := harness.WaitForPodsBound(t, cp.Client, ns, gang...)
	for _, node := range bound {
		if node != nodes[2] && node != nodes[3] {
			t.Errorf("gang member on %s, want leaf 1 (%s, %s)", node, nodes[2], nodes[3])
		}
	}
	for _, name := range ev.list() {
		if strings.HasPrefix(name, "frozen") || strings.HasPrefix(name, "lite") {
			t.Errorf("%s of the protected leaf was evicted", name)
		}
	}
	second := researchGang(t, cp, ns, "second", 2, 8)
	stop := harness.ExpectNeverBound(t, cp.Client, ns, second...)
	defer stop()
	harness.WaitForEvent(t, cp.Client, ns, "Pod", second[0], "NoOverflowClaim", "cannot move", "PodDisruptionBudget frozen allows no disruption", "frozen-")
	harness.CheckGangsAtRest(t, inv)
}

// TestCrashLoopingReplicaDoesNotBlock: one replica of the victims'
// ReplicaSet crash-loops on the overflow node. Each eviction waits only
// for the victim's own replacement, so the claim finishes.
func TestCrashLoopingReplicaDoesNotBlock(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "cl", 1, 1, 1, 64, false)
	startSchedulerWith(t, cp, 600, &configv1.ClaimsConfig{WaveTimeoutSeconds: ptr.To[int64](600)})
	// Five 2-GPU replicas: four fill the node, the fifth spills over.
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 5, 2), "cl-overflow", "", nodes[0]), harness.PDB(ns, "serve", intstr.FromInt32(2)))
	waitPlaced(t, cp, ns, "serve", 5, func(n string) bool { return n != "" }, "anywhere")
	for _, p := range podsOf(t, cp, ns, "serve") {
		if p.Spec.NodeName != "cl-overflow" {
			continue
		}
		// It crash-loops from now on: Running, never Ready again.
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady"},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse}, {Type: v1.PodScheduled, Status: v1.ConditionTrue}}
		if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	researchPod(t, cp, ns, "train", 8)
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	if n := inv.Evictions()["production"]; n != 4 {
		t.Errorf("%d evicted, want the 4 replicas on %s", n, nodes[0])
	}
}

// TestDeploymentWithoutBudgetIsPaced: a Deployment without a
// PodDisruptionBudget loses at most the default budget (25%) at once.
func TestDeploymentWithoutBudgetIsPaced(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "np", 1, 1, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 8, 1), "np-overflow", "", nodes[0]), nil)
	waitPlaced(t, cp, ns, "serve", 8, func(n string) bool { return n == nodes[0] }, "on "+nodes[0])
	watch := watchBudgets(t, cp, ns, budgets([]deployment{{"serve", 8, 1, intstr.FromString("25%")}}))
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	researchPod(t, cp, ns, "train", 8)
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	waitPlaced(t, cp, ns, "serve", 8, func(n string) bool { return n == "np-overflow" }, "on the overflow node")
	watch.check(t)
}

// TestConcurrentClaimsShareADefaultBudget: two research pods claim a node
// each at once, every victim a replica of one Deployment without a
// PodDisruptionBudget (8 replicas, 4 on each node). Between them the two
// claims never take more than the default budget (25%: 2) down, counted by
// a watcher of Ready replicas, and both research pods are bound.
func TestConcurrentClaimsShareADefaultBudget(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "cb", 1, 2, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 8, 2), "cb-overflow", "", nodes...), nil)
	waitPlaced(t, cp, ns, "serve", 8, func(n string) bool { return n == nodes[0] || n == nodes[1] }, "on "+strings.Join(nodes, " and "))
	watch := watchBudgets(t, cp, ns, budgets([]deployment{{"serve", 8, 2, intstr.FromString("25%")}}))
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	researchPod(t, cp, ns, "train-a", 8)
	researchPod(t, cp, ns, "train-b", 8)
	harness.WaitForPodsBound(t, cp.Client, ns, "train-a", "train-b")
	waitPlaced(t, cp, ns, "serve", 8, func(n string) bool { return n == "cb-overflow" }, "on the overflow node")
	watch.check(t)
}

// TestBarePodNeverAVictim: a production pod without a controller is never
// evicted (nothing would recreate it), though it comes first by name;
// research waiting only on it is told so.
func TestBarePodNeverAVictim(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "bp", 1, 2, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "bare").PriorityClass("production").TolerateOverflow().GPUs(8).OnNode(nodes[0]).Obj())
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "movable", 1, 8), "bp-overflow", "", nodes[1]), nil)
	waitPlaced(t, cp, ns, "movable", 1, func(n string) bool { return n == nodes[1] }, "on "+nodes[1])
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	researchPod(t, cp, ns, "train-1", 8)
	if node := harness.WaitForPodsBound(t, cp.Client, ns, "train-1")["train-1"]; node != nodes[1] {
		t.Fatalf("research took %s, want %s", node, nodes[1])
	}
	stop := harness.ExpectNeverBound(t, cp.Client, ns, "train-2")
	defer stop()
	researchPod(t, cp, ns, "train-2", 8)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train-2", "NoOverflowClaim", "bare (it has no controller")
	if _, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), "bare", metav1.GetOptions{}); err != nil {
		t.Errorf("the bare pod is gone: %v", err)
	}
}

// TestStatefulSetVictim: a StatefulSet's pods are moved one budget step at
// a time (the default 25% of 2 replicas: one), each waiting for its own
// replacement, the pod of the same name, Ready on the overflow node.
func TestStatefulSetVictim(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "ss", 1, 1, 2, 64, false)
	startScheduler(t, cp, 600)
	d := pinned(harness.InferenceDeployment(ns, "db", 2, 8), "ss-overflow", "", nodes...)
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: d.Spec.Selector, Template: d.Spec.Template,
			PodManagementPolicy: appsv1.ParallelPodManagement},
	}
	if _, err := cp.Client.AppsV1().StatefulSets(ns).Create(context.Background(), ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, cp, ns, "db", 2, func(n string) bool { return n == nodes[0] || n == nodes[1] }, "on the physical nodes")
	watch := watchBudgets(t, cp, ns, budgets([]deployment{{"db", 2, 8, intstr.FromInt32(1)}}))
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	gang := researchGang(t, cp, ns, "train", 2, 8)
	harness.WaitForPodsBound(t, cp.Client, ns, gang...)
	waitPlaced(t, cp, ns, "db", 2, func(n string) bool { return n == "ss-overflow" }, "on the overflow node")
	watch.check(t)
}

// TestOverflowNotReadyPausesClaim: the overflow node goes NotReady after
// the first eviction. The claim pauses: no eviction while it is NotReady,
// though the first victim's replacement turns Ready (the moment a wave
// would go on); when the node is Ready again, the claim finishes.
func TestOverflowNotReadyPausesClaim(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "nr", 1, 1, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 4, 2), "nr-overflow", "", nodes[0]), harness.PDB(ns, "serve", intstr.FromInt32(1)))
	waitPlaced(t, cp, ns, "serve", 4, func(n string) bool { return n == nodes[0] }, "on "+nodes[0])
	inv := harness.WatchInvariants(t, cp, ns, 64)
	ev := watchEvictions(t, cp, ns)
	// setReady may run on the watch's goroutine: it reports, not fails.
	setReady := func(ready bool) {
		status := v1.ConditionTrue
		if !ready {
			status = v1.ConditionFalse
		}
		if err := setNodeReady(cp, "nr-overflow", status); err != nil {
			t.Errorf("setting nr-overflow Ready=%s: %v", status, err)
		}
	}
	var once sync.Once
	down := make(chan struct{})
	ev.mu.Lock()
	ev.hook = func(*v1.Pod) { once.Do(func() { setReady(false); close(down) }) }
	ev.mu.Unlock()
	inv.Arm()
	researchPod(t, cp, ns, "train", 8)
	select {
	case <-down:
	case <-time.After(harness.DefaultTimeout):
		t.Fatal("no eviction")
	}
	waitClaim(t, cp, ns, "paused with a replacement Ready", func(c *v1alpha1.ResearchClaim) bool {
		return c.Status.Phase == v1alpha1.PhasePaused && len(c.Status.Replaced) >= 1 && strings.Contains(c.Status.Message, "not Ready")
	})
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train", "ClaimPaused", "nr-overflow")
	if n := ev.count(); n != 1 {
		t.Fatalf("%d evictions while the overflow node was NotReady (%v), want only the first", n, ev.list())
	}
	setReady(true)
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	if n := ev.count(); n != 4 {
		t.Errorf("%d evictions, want 4", n)
	}
}

// TestLabelGangClaimConverges: a scheduler-plugins gang claims a leaf of
// production, ten times over (each time production comes back after the
// gang ends): every claim converges, no production replacement lands back
// on a node being freed (production may go to any node here), no gang is
// left half bound.
func TestLabelGangClaimConverges(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "lg", 1, 1, 2, 64, false)
	startScheduler(t, cp, 1)
	for i := range nodes {
		name := fmt.Sprintf("serve-%d", i)
		harness.CreateDeployment(t, cp, harness.InferenceDeployment(ns, name, 2, 4), harness.PDB(ns, name, intstr.FromInt32(1)))
	}
	physical := func(n string) bool { return n == nodes[0] || n == nodes[1] }
	for i := range nodes {
		waitPlaced(t, cp, ns, fmt.Sprintf("serve-%d", i), 2, physical, "on physical nodes")
	}
	inv := harness.WatchInvariants(t, cp, ns, 64)
	inv.Arm()
	for run := range 10 {
		name := fmt.Sprintf("train-%d", run)
		harness.CreateLabelPodGroup(t, cp, harness.LabelPodGroup(ns, name, 2, 0, nil))
		var members []string
		for m := range 2 {
			member := fmt.Sprintf("%s-%d", name, m)
			harness.CreatePods(t, cp.Client, harness.Pod(ns, member).Scheduler("sluice-research").PriorityClass("research").GPUs(8).
				Label("scheduling.x-k8s.io/pod-group", name).Obj())
			members = append(members, member)
		}
		start := time.Now()
		harness.WaitForPodsBound(t, cp.Client, ns, members...)
		t.Logf("run %d: gang bound after %s", run, time.Since(start).Round(time.Millisecond))
		harness.CheckGangsAtRest(t, inv)
		harness.DeletePods(t, cp.Client, ns, members...)
		deleteLabelPodGroup(t, cp, ns, name)
		for i := range nodes {
			waitPlaced(t, cp, ns, fmt.Sprintf("serve-%d", i), 2, physical, "back on physical nodes")
		}
	}
}

func deleteLabelPodGroup(t *testing.T, cp *harness.ControlPlane, ns, name string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(harness.LabelPodGroupResource).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestUnplaceableResearchDoesNotBlockReturns: a research pod that can
// never be placed (it asks for more GPUs than any node has) does not keep
// production on the overflow node once physical room frees.
func TestUnplaceableResearchDoesNotBlockReturns(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "ur", 1, 1, 1, 64, false)
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "filler").PriorityClass("research").GPUs(8).OnNode(nodes[0]).Obj())
	startScheduler(t, cp, 2)
	harness.CreateDeployment(t, cp, pinned(harness.InferenceDeployment(ns, "serve", 1, 8), "ur-overflow", "", nodes[0]), nil)
	waitPlaced(t, cp, ns, "serve", 1, func(n string) bool { return n == "ur-overflow" }, "on the overflow node")
	stop := harness.ExpectNeverBound(t, cp.Client, ns, "huge")
	defer stop()
	researchPod(t, cp, ns, "huge", 16)
	harness.WaitForPodsUnschedulable(t, cp.Client, ns, "huge")
	harness.DeletePods(t, cp.Client, ns, "filler")
	waitPlaced(t, cp, ns, "serve", 1, func(n string) bool { return n == nodes[0] }, "back on "+nodes[0])
}

// setNodeReady sets a node's Ready condition.
func setNodeReady(cp *harness.ControlPlane, name string, status v1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}}
		_, err = cp.Client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{})
		return err
	})
}

// TestClaimOf50000VictimsIsRecordedAndEnded: a claim of 50,000 victims
// (a 512-pod gang freeing 2,500 Deployments of 20) is recorded in the real
// apiserver and etcd (etcd refuses a request over 1.5 MiB; on main, before
// claims were split into records, the create was refused at 3 MiB) in 100
// records; each record's status is written at its largest (every victim
// evicted and replaced); the claim reads back whole, victims of each
// controller in order; and the claim engine, against the same apiserver,
// ends it once its claimants are bound: every record deleted, the first
// last.
//
//	go test ./test/integration/overflow -run TestClaimOf50000VictimsIsRecordedAndEnded -v
func TestClaimOf50000VictimsIsRecordedAndEnded(t *testing.T) {
	const victims, sets, gang = 50000, 2500, 512
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	store := claims.NewStore(ctx, dyn, cp.Client.Discovery())
	key := ns + "/train (scheduling.k8s.io/v1beta1)"
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claims.NameOf(key)}}
	c.Spec = v1alpha1.ResearchClaimSpec{Key: key, Domain: "block/b0", TimeoutSeconds: 600, ReplacementTimeoutSeconds: 300,
		Note: "50000 production pods chosen as the fewest victims in block/b0"}
	// The claimants are real pods, bound to their nodes (the engine ends a
	// claim whose claimants are bound).
	for i := range gang {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("train-%d", i)},
			Spec: v1.PodSpec{NodeName: fmt.Sprintf("gpu-%d", i), Containers: []v1.Container{{Name: "c", Image: "train"}}}}
		created, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.Claimants = append(c.Spec.Claimants, v1alpha1.Claimant{Name: created.Name, UID: created.UID, Node: created.Spec.NodeName})
	}
	owners := make([]v1alpha1.Owner, sets)
	for d := range owners {
		owners[d] = v1alpha1.Owner{Kind: "ReplicaSet", Name: fmt.Sprintf("prod-%04d-7596c99797", d), UID: uuid.NewUUID()}
	}
	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("4Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	want := map[string][]string{}
	for i := range victims {
		// Node by node, 8 a node, each of another Deployment: the order
		// the planner lists them in.
		o := owners[(i*37)%len(owners)]
		v := v1alpha1.Victim{Namespace: "production-0", Name: fmt.Sprintf("%s-%05d", o.Name, i), UID: uuid.NewUUID(), Node: fmt.Sprintf("gpu-%d", i/8),
			Owner: o, Budget: "default/production-0/ReplicaSet/" + o.Name, Target: v1alpha1.Target{Node: "overflow-0", Provider: "provider-a"}, Requests: requests}
		c.Spec.Victims = append(c.Spec.Victims, v)
		want[o.Name] = append(want[o.Name], v.Name)
	}
	first, err := store.CreateClaim(ctx, c)
	if err != nil {
		t.Fatalf("recording a claim of %d victims: %v", len(c.Spec.Victims), err)
	}
	now := metav1.Now()
	for _, rec := range claimsOf(t, cp, ns) {
		for _, v := range rec.Spec.Victims {
			rec.Status.Evicted = append(rec.Status.Evicted, v1alpha1.Eviction{UID: v.UID, Time: now})
			rec.Status.Replaced = append(rec.Status.Replaced, v.UID)
			rec.Status.Replacements = append(rec.Status.Replacements, uuid.NewUUID())
		}
		rec.Status.Phase, rec.Status.Rounds, rec.Status.ProgressTime = v1alpha1.PhaseFreed, 200, now
		if _, err := store.UpdateStatus(ctx, &rec); err != nil {
			t.Fatalf("writing the status of %s, %d victims all evicted and replaced: %v", rec.Name, len(rec.Spec.Victims), err)
		}
	}
	read := claimsOf(t, cp, ns)
	if len(read) != victims/v1alpha1.MaxVictimsPerRecord {
		t.Fatalf("%d records read back, want %d", len(read), victims/v1alpha1.MaxVictimsPerRecord)
	}
	gotOrder := map[string][]string{}
	total, replaced := 0, 0
	for i := range read {
		rec := &read[i]
		if name, _ := rec.FirstRecord(); name != first.Name || len(rec.Spec.Claimants) != gang || rec.Status.Phase != v1alpha1.PhaseFreed {
			t.Fatalf("record %s read back of claim %s, %d claimants, phase %q; want %s, %d, Freed", rec.Name, name, len(rec.Spec.Claimants), rec.Status.Phase, first.Name, gang)
		}
		total, replaced = total+len(rec.Spec.Victims), replaced+len(rec.Status.Replaced)
	}
	// In record order, the victims are the claim's.
	slices.SortFunc(read, func(a, b v1alpha1.ResearchClaim) int { return a.RecordIndex() - b.RecordIndex() })
	for _, rec := range read {
		for _, v := range rec.Spec.Victims {
			if v.Budget != "default/production-0/ReplicaSet/"+v.Owner.Name || v.Target.Provider != "provider-a" || !v.Requests["nvidia.com/gpu"].Equal(resource.MustParse("1")) {
				t.Fatalf("victim %s read back as %+v", v.Name, v)
			}
			gotOrder[v.Owner.Name] = append(gotOrder[v.Owner.Name], v.Name)
		}
	}
	if total != victims || replaced != victims {
		t.Fatalf("read back %d victims, %d replaced; want %d", total, replaced, victims)
	}
	for o, names := range want {
		if strings.Join(gotOrder[o], ",") != strings.Join(names, ",") {
			t.Fatalf("victims of %s read back as %v, want %v", o, gotOrder[o], names)
		}
	}
	t.Logf("a claim of %d victims and %d claimants, all evicted and replaced, recorded in %d records and read back", total, gang, len(read))

	// The engine ends it: the claimants are bound and every victim's
	// replacement placed.
	deleted := watchDeletedClaims(t, cp, ns)
	runEngine(t, cp, store)
	// Every deletion seen by the watch (it may trail the list).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return len(deleted()) >= len(read), nil
	}); err != nil {
		t.Fatalf("%d records deleted after the claimants were bound, want %d; %d left: %v", len(deleted()), len(read), len(claimsOf(t, cp, ns)), err)
	}
	if got := deleted(); len(got) != len(read) || got[len(got)-1] != first.Name {
		t.Fatalf("%d records deleted, the last %s; want all %d, the first (%s) last", len(got), got[len(got)-1], len(read), first.Name)
	}
	if left := claimsOf(t, cp, ns); len(left) != 0 {
		t.Fatalf("%d records left after every deletion", len(left))
	}
}

// watchDeletedClaims records the names of the claims deleted in ns, in
// order.
func watchDeletedClaims(t *testing.T, cp *harness.ControlPlane, ns string) func() []string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A retry watcher: the apiserver may end a watch (of records near
	// etcd's size limit, under load: it did, in a fresh-clone run, and
	// the test saw no deletion); it resumes from the last event seen.
	claimsAPI := dyn.Resource(v1alpha1.Resource).Namespace(ns)
	list, err := claimsAPI.List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(t.Context(), list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return claimsAPI.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var names []string
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				mu.Lock()
				names = append(names, u.GetName())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(names)
	}
}

// runEngine runs a claim engine over store against the control plane
// until the test ends.
func runEngine(t *testing.T, cp *harness.ControlPlane, store *claims.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	inf := informers.NewSharedInformerFactory(cp.Client, 0)
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := disruption.NewLedger(inf, intstr.FromString("25%"), cp.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := claims.NewEngine(claims.Config{Client: cp.Client, Informers: inf, Store: store, Classes: classes, Ledger: ledger, RetryBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	inf.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		engine.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		inf.Shutdown()
	})
}
