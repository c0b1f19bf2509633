// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/test/harness"
)

// researchGang creates a native research gang of pods x gpus.
func researchGang(t *testing.T, cp *harness.ControlPlane, ns, name string, pods, gpus int) []string {
	t.Helper()
	pg := harness.NativePodGroup(ns, name, int32(pods), nil)
	pg.Spec.PriorityClassName = "research"
	harness.CreateNativePodGroup(t, cp.Client, pg)
	var names []string
	for i := 0; i < pods; i++ {
		n := fmt.Sprintf("%s-%d", name, i)
		harness.CreatePods(t, cp.Client, harness.Pod(ns, n).Scheduler("sluice-research").PriorityClass("research").GPUs(gpus).SchedulingGroup(name).Obj())
		names = append(names, n)
	}
	return names
}

// TestClaimAndReturn is the story: 16 nodes x 8 GPUs full of inference
// Deployments with PDBs (maxUnavailable 1 to 25%) and one overflow node. A
// research gang claims all 128 GPUs and gets them; every production replica
// ends Ready on the overflow node; no PDB's budget is ever exceeded; no
// research pod is evicted. When research finishes, production comes back to
// the physical nodes, PDBs intact.
func TestClaimAndReturn(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	overflowNode := "ca-overflow"
	cluster(t, cp, "ca", 2, 2, 4, 256, false)
	startScheduler(t, cp, 3)
	physical := func(n string) bool { return n != "" && n != overflowNode }
	onOverflow := func(n string) bool { return n == overflowNode }

	ds := []deployment{
		{"llm-a", 16, 1, intstr.FromInt32(1)}, {"llm-b", 16, 1, intstr.FromInt32(2)},
		{"llm-c", 16, 1, intstr.FromString("25%")}, {"llm-d", 16, 1, intstr.FromString("10%")},
		{"llm-e", 16, 1, intstr.FromInt32(1)}, {"llm-f", 16, 1, intstr.FromInt32(3)},
		{"llm-g", 16, 1, intstr.FromString("20%")}, {"llm-h", 16, 1, intstr.FromInt32(2)},
	}
	createDeployments(t, cp, ns, ds)
	for _, d := range ds {
		waitPlaced(t, cp, ns, d.name, d.replicas, physical, "on physical nodes")
	}
	watch := watchBudgets(t, cp, ns, budgets(ds))
	inv := harness.WatchInvariants(t, cp, ns, 256)
	inv.Arm()
	// No research pod is ever deleted (evicted) until the test ends the
	// gang: checked at every pod change.
	var violations harness.Violations
	var gangEnds atomic.Bool
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		if e.New == nil && e.Old.Spec.PriorityClassName == "research" && !gangEnds.Load() {
			violations.Addf("research pod %s was deleted during the claim", e.Old.Name)
		}
	})

	progress := watchClaimCondition(t, cp, ns)
	start := time.Now()
	gang := researchGang(t, cp, ns, "pretrain", 16, 8)
	bound := harness.WaitForPodsBound(t, cp.Client, ns, gang...)
	t.Logf("research gang of 16 x 8 GPUs bound after %s", time.Since(start).Round(time.Millisecond))
	nodes := map[string]bool{}
	for _, n := range bound {
		nodes[n] = true
	}
	if len(nodes) != 16 {
		t.Errorf("gang on %d nodes, want all 16", len(nodes))
	}
	for _, d := range ds {
		waitPlaced(t, cp, ns, d.name, d.replicas, onOverflow, "on the overflow node")
	}
	t.Logf("all 128 production replicas Ready on the overflow node after %s", time.Since(start).Round(time.Millisecond))
	watch.check(t)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", gang[0], "ClaimingGPUs", "move to overflow nodes")
	progress.check(t, "pretrain")

	// Research finishes: production returns to physical nodes.
	gangEnds.Store(true)
	violations.Check(t)
	start = time.Now()
	for _, name := range gang {
		if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		waitPlaced(t, cp, ns, d.name, d.replicas, physical, "back on physical nodes")
	}
	t.Logf("all production back on physical nodes %s after research finished (hysteresis 3s)", time.Since(start).Round(time.Millisecond))
	watch.check(t)
	harness.CheckGangsAtRest(t, inv)
}

// TestProductionSpillsOnlyWhenFull: production alone packs the physical
// nodes first and spills to the overflow node only once they are full.
func TestProductionSpillsOnlyWhenFull(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	cluster(t, cp, "sp", 1, 2, 4, 64, false) // 64 physical GPUs
	startScheduler(t, cp, 600)
	harness.WatchInvariants(t, cp, ns, 64).Arm()
	createDeployments(t, cp, ns, []deployment{{"first", 60, 1, intstr.FromInt32(1)}})
	waitPlaced(t, cp, ns, "first", 60, func(n string) bool { return n != "sp-overflow" && n != "" }, "on physical nodes")
	createDeployments(t, cp, ns, []deployment{{"second", 8, 1, intstr.FromInt32(1)}})
	var physical, overflow int
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		physical, overflow = 0, 0
		for _, app := range []string{"first", "second"} {
			for _, p := range podsOf(t, cp, ns, app) {
				switch {
				case p.Spec.NodeName == "sp-overflow":
					overflow++
				case p.Spec.NodeName != "":
					physical++
				}
			}
		}
		return physical+overflow == 68, nil
	}, func() string { return fmt.Sprintf("%d physical + %d overflow of 68", physical, overflow) })
	if physical != 64 || overflow != 4 {
		t.Errorf("%d pods on physical nodes and %d on the overflow node, want 64 and 4 (overflow only when full)", physical, overflow)
	}
}

// TestOverflowUnavailable: when the overflow node is NotReady, or has no
// room for the production a claim would move, research waits and no
// production pod is evicted.
func TestOverflowUnavailable(t *testing.T) {
	for _, tt := range []struct {
		name     string
		gpus     int
		notReady bool
		want     string
	}{
		{"overflow node NotReady", 256, true, "0 Ready overflow nodes"},
		{"overflow node full", 4, false, "the overflow nodes have no room"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cp := harness.Shared(t)
			ns := harness.NewNamespace(t, cp.Client)
			prefix := "ou" + harness.NewNameSuffix()
			cluster(t, cp, prefix, 1, 2, 4, tt.gpus, tt.notReady)
			startScheduler(t, cp, 600)
			ds := []deployment{{"serve", 64, 1, intstr.FromString("25%")}}
			createDeployments(t, cp, ns, ds)
			waitPlaced(t, cp, ns, "serve", 64, func(n string) bool { return n != "" && !strings.HasSuffix(n, "-overflow") }, "on physical nodes")
			before := map[types.UID]bool{}
			for _, p := range podsOf(t, cp, ns, "serve") {
				before[p.UID] = true
			}
			harness.WatchInvariants(t, cp, ns, int64(tt.gpus)).Arm()
			gang := researchGang(t, cp, ns, "wait", 8, 8)
			harness.ExpectNeverBound(t, cp.Client, ns, gang...)
			harness.WaitForEvent(t, cp.Client, ns, "Pod", gang[0], "NoOverflowClaim", tt.want)
			for _, p := range podsOf(t, cp, ns, "serve") {
				if !before[p.UID] {
					t.Fatalf("production pod %s is new: something was evicted", p.Name)
				}
			}
		})
	}
}

// TestNeverAnnotatedPodIsNeverAVictim: a production pod annotated
// sluice.dev/overflow: never is never evicted, even when it is the only
// thing between research and a node.
func TestNeverAnnotatedPodIsNeverAVictim(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	cluster(t, cp, "nv", 1, 1, 2, 64, false)
	startScheduler(t, cp, 600)
	keep := harness.InferenceDeployment(ns, "keep", 1, 8)
	keep.Spec.Template.Annotations = map[string]string{"sluice.dev/overflow": "never"}
	harness.CreateDeployment(t, cp, keep, nil)
	harness.CreateDeployment(t, cp, harness.InferenceDeployment(ns, "movable", 1, 8), nil)
	waitPlaced(t, cp, ns, "keep", 1, func(n string) bool { return n != "" && n != "nv-overflow" }, "on a physical node")
	waitPlaced(t, cp, ns, "movable", 1, func(n string) bool { return n != "" && n != "nv-overflow" }, "on a physical node")
	kept := podsOf(t, cp, ns, "keep")[0]
	harness.WatchInvariants(t, cp, ns, 64).Arm()

	research := func(name string) {
		harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	}
	research("worker-1")
	if node := harness.WaitForPodsBound(t, cp.Client, ns, "worker-1")["worker-1"]; node == kept.Spec.NodeName {
		t.Fatalf("research took %s, the node of the never-evict pod", node)
	}
	waitPlaced(t, cp, ns, "movable", 1, func(n string) bool { return n == "nv-overflow" }, "on the overflow node")
	harness.ExpectNeverBound(t, cp.Client, ns, "worker-2")
	research("worker-2")
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "worker-2", "NoOverflowClaim")
	if now := podsOf(t, cp, ns, "keep"); len(now) != 1 || now[0].UID != kept.UID {
		t.Fatalf("the never-evict pod was replaced: %v", now)
	}
}

// TestFlappingCapacityDoesNotPingPong: physical room that frees for less
// than the hysteresis window moves nothing back; room that stays free for
// longer brings production back. The return controller's Events mark the
// window (ReturnPlanned when room appears, ReturnDeferred when it goes
// again), so the test waits on them, and no eviction may happen in
// between (watched on every pod change).
func TestFlappingCapacityDoesNotPingPong(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "fl", 1, 1, 2, 64, false)
	// Research fills both physical nodes (bound directly, not waiting).
	filler := func(i int) *v1.Pod {
		return harness.Pod(ns, fmt.Sprintf("filler-%d", i)).PriorityClass("research").GPUs(8).OnNode(nodes[i]).Obj()
	}
	harness.CreatePods(t, cp.Client, filler(0), filler(1))
	startScheduler(t, cp, 10)
	createDeployments(t, cp, ns, []deployment{{"serve", 2, 8, intstr.FromInt32(1)}})
	waitPlaced(t, cp, ns, "serve", 2, func(n string) bool { return n == "fl-overflow" }, "on the overflow node")
	inv := harness.WatchInvariants(t, cp, ns, 64)
	var flapping atomic.Bool
	flapping.Store(true)
	var moved harness.Violations
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		if p := e.New; p != nil && flapping.Load() && p.Labels["app"] == "serve" && disruptionTarget(p) {
			moved.Addf("production pod %s moved back on flapping capacity", p.Name)
		}
	})
	inv.Arm()

	// Room on node 0, then taken again within the 10 s window.
	harness.DeletePods(t, cp.Client, ns, "filler-0")
	planned := harness.WaitForEvent(t, cp.Client, ns, "Pod", "", "ReturnPlanned", nodes[0])
	harness.CreatePods(t, cp.Client, filler(0))
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "", "ReturnDeferred", "taken again")
	flapping.Store(false)
	moved.Check(t)
	t.Logf("window started and cut short: %s", planned)

	// Room that stays: one replica comes back after the window.
	harness.DeletePods(t, cp.Client, ns, "filler-1")
	harness.Eventually(t, 2*harness.DefaultTimeout, func(context.Context) (bool, error) {
		back := 0
		for _, p := range podsOf(t, cp, ns, "serve") {
			if p.Spec.NodeName == nodes[1] && isReady(&p) {
				back++
			}
		}
		return back == 1, nil
	}, func() string { return "no production replica came back to " + nodes[1] })
}

// claimCondition follows the research claim's condition on the PodGroups
// of a namespace, from an informer: every status and message it had.
type claimCondition struct {
	mu   sync.Mutex
	seen map[string][]string // PodGroup -> "Status Reason: Message", in order
	last map[string][]metav1.Condition
}

func watchClaimCondition(t *testing.T, cp *harness.ControlPlane, ns string) *claimCondition {
	t.Helper()
	w := &claimCondition{seen: map[string][]string{}, last: map[string][]metav1.Condition{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns))
	inf := factory.Scheduling().V1beta1().PodGroups().Informer()
	record := func(obj any) {
		pg, ok := obj.(*schedulingv1beta1.PodGroup)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.last[pg.Name] = pg.Status.Conditions
		for _, c := range pg.Status.Conditions {
			if c.Type != claims.ConditionType {
				continue
			}
			s := fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			if seen := w.seen[pg.Name]; len(seen) == 0 || seen[len(seen)-1] != s {
				w.seen[pg.Name] = append(seen, s)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

// check: the claim's progress was written on the PodGroup step by step
// (moved, moving and left, in numbers), ended False Freed, and the
// placement condition sluice also writes there is still present.
func (w *claimCondition) check(t *testing.T, podGroup string) {
	t.Helper()
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		seen := w.seen[podGroup]
		return len(seen) > 0 && strings.HasPrefix(seen[len(seen)-1], "False Freed: ") && hasCondition(w.last[podGroup], "sluice.dev/FabricPlaced"), nil
	}, func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return fmt.Sprintf("PodGroup %s: claim condition False Freed beside FabricPlaced; seen %q, conditions now %v", podGroup, w.seen[podGroup], w.last[podGroup])
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	steps := 0
	for _, s := range w.seen[podGroup] {
		if strings.HasPrefix(s, "True Evicting: ") && strings.Contains(s, " production pods moved, ") && strings.Contains(s, " to go") {
			steps++
		}
	}
	if steps < 2 {
		t.Errorf("the claim's progress was written %d times while evicting, want one per step (at least 2 for 128 victims): %q", steps, w.seen[podGroup])
	}
	t.Logf("claim condition on PodGroup %s: %d steps, last %q", podGroup, len(w.seen[podGroup]), w.seen[podGroup][len(w.seen[podGroup])-1])
}

func hasCondition(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return true
		}
	}
	return false
}
