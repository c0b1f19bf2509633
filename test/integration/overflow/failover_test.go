// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/nodesim"
	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/test/harness"
)

// pair is two real sluice-scheduler processes electing a leader; replace
// starts a new standby for one that was killed.
type pair struct {
	t    *testing.T
	cp   *harness.ControlPlane
	le   harness.LeaderElection
	cfg  *harness.SchedulerConfig
	mu   sync.Mutex
	n    int
	live []*harness.Process
}

func startPair(t *testing.T, cp *harness.ControlPlane, ns string, hysteresis int64) *pair {
	t.Helper()
	p := &pair{t: t, cp: cp, le: harness.LeaderElection{Namespace: ns, Lease: "sluice-scheduler"}, cfg: schedulerConfig(t, hysteresis, nil)}
	leader := p.start()
	// The first holds the Lease before the second starts: it is the leader.
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		return harness.LeaseHolder(t, cp, p.le) != "", nil
	}, func() string { return leader.String() + " holds the Lease" })
	p.start()
	return p
}

func (p *pair) start() *harness.Process {
	p.mu.Lock()
	name := fmt.Sprintf("scheduler-%d", p.n)
	p.n++
	p.mu.Unlock()
	proc := harness.StartSchedulerProcess(p.t, p.cp, p.cfg, name, p.le)
	p.mu.Lock()
	p.live = append(p.live, proc)
	p.mu.Unlock()
	return proc
}

// killLeader kills the process that has led longest (the first alive: a
// standby only leads once the one before it is gone) with SIGKILL, and
// starts a new standby.
func (p *pair) killLeader() *harness.Process {
	p.mu.Lock()
	leader := p.live[0]
	p.live = p.live[1:]
	p.mu.Unlock()
	leader.Kill()
	p.start()
	return leader
}

// production fills each of nodes with a Deployment of 4 x 2-GPU replicas
// (PDB maxUnavailable 1), pinned to the node and the overflow node. With
// grace > 0 its pods take that long to terminate (they drain requests).
func production(t *testing.T, cp *harness.ControlPlane, ns, overflowNode string, nodes []string, grace int64) []string {
	t.Helper()
	var names []string
	for i, n := range nodes {
		name := fmt.Sprintf("serve-%d", i)
		d := pinned(harness.InferenceDeployment(ns, name, 4, 2), overflowNode, "", n)
		if grace > 0 {
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
			d.Spec.Template.Annotations = map[string]string{nodesim.GracefulAnnotation: "true"}
		}
		harness.CreateDeployment(t, cp, d, harness.PDB(ns, name, intstr.FromInt32(1)))
		names = append(names, name)
	}
	for i, n := range nodes {
		waitPlaced(t, cp, ns, names[i], 4, func(node string) bool { return node == n }, "on "+n)
	}
	return names
}

// leafOf maps each node of cluster() to its leaf.
func leafOf(nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		out[n] = n[:strings.LastIndex(n, "n")]
	}
	return out
}

// TestFailover: two real sluice-scheduler processes; the leader is killed
// (SIGKILL) right after the claim's first eviction, while its victims are
// still draining. The new leader resumes the claim from the apiserver: it
// plans no second domain (the terminating victims count as evicted, not as
// pods that can never move), breaks no budget, the gang runs, and
// production comes back once it ends.
func TestFailover(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "fo", 1, 2, 2, 256, false)
	p := startPair(t, cp, ns, 2)
	// Victims drain for 10 s: still terminating when the new leader takes
	// over.
	apps := production(t, cp, ns, "fo-overflow", nodes, 10)
	inv := harness.WatchInvariants(t, cp, ns, 256)
	ev := watchEvictions(t, cp, ns)
	killed := make(chan *harness.Process, 1)
	var once sync.Once
	ev.mu.Lock()
	ev.hook = func(*v1.Pod) { once.Do(func() { killed <- p.killLeader() }) }
	ev.mu.Unlock()
	inv.Arm()

	start := time.Now()
	gang := researchGang(t, cp, ns, "train", 2, 8)
	select {
	case k := <-killed:
		t.Logf("killed the leader %s after the first eviction, %s into the claim", k, time.Since(start).Round(time.Millisecond))
	case <-time.After(2 * harness.DefaultTimeout):
		t.Fatal("no eviction")
	}
	bound := harness.WaitForPodsBound(t, cp.Client, ns, gang...)
	t.Logf("gang bound %s after the claim began, the new leader finishing it", time.Since(start).Round(time.Millisecond))
	leaves := sets.New[string]()
	for _, n := range ev.onNodes() {
		leaves.Insert(leafOf(nodes)[n])
	}
	if leaves.Len() != 1 {
		t.Errorf("production evicted in %d leaves %v, want only the claimed one", leaves.Len(), sets.List(leaves))
	}
	for _, n := range bound {
		if !leaves.Has(leafOf(nodes)[n]) {
			t.Errorf("gang member on %s, outside the leaf its claim freed (%v)", n, sets.List(leaves))
		}
	}
	harness.CheckGangsAtRest(t, inv)

	// Research ends: the new leader's return controller brings production
	// back.
	harness.DeletePods(t, cp.Client, ns, gang...)
	for i, n := range nodes {
		waitPlaced(t, cp, ns, apps[i], 4, func(node string) bool { return node == n }, "back on "+n)
	}
	t.Logf("evictions: %v", inv.Evictions())
}

// TestCutOffEvictionIsWaitedOut: a PodDisruptionBudget lists a pod among
// its disruptedPods (as an eviction cut off between its two writes leaves
// it) though no claim of sluice's recorded evicting it: someone else's
// eviction, or a pod name reused. The record is written as 1 min 55 s old,
// so the disruption controller drops it within seconds. sluice never
// deletes the pod on the strength of that record (no "finishing an
// eviction" Event, every eviction through the Eviction API), breaks no
// budget, and the gang is bound once the records are gone.
func TestCutOffEvictionIsWaitedOut(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "co", 1, 2, 2, 256, false)
	startScheduler(t, cp, 2)
	apps := production(t, cp, ns, "co-overflow", nodes, 0)
	inv := harness.WatchInvariants(t, cp, ns, 256)
	inv.Arm()
	for _, app := range apps {
		spent := podsOf(t, cp, ns, app)[0].Name
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), app, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pdb.Status.DisruptedPods == nil {
				pdb.Status.DisruptedPods = map[string]metav1.Time{}
			}
			pdb.Status.DisruptedPods[spent] = metav1.NewTime(time.Now().Add(-115 * time.Second))
			pdb.Status.DisruptionsAllowed--
			_, err = cp.Client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(t.Context(), pdb, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("spending %s's budget on %s: %v", app, spent, err)
		}
	}
	start := time.Now()
	gang := researchGang(t, cp, ns, "train", 2, 8)
	harness.WaitForPodsBound(t, cp.Client, ns, gang...)
	t.Logf("gang bound %s after the claim began, every budget first spent by a record nobody wrote", time.Since(start).Round(time.Millisecond))
	for _, e := range harness.ObjectEvents(t, cp.Client, ns, "Pod", "") {
		if strings.Contains(e, "finishing an eviction") {
			t.Errorf("a pod was deleted behind the Eviction API on a record sluice never wrote: %s", e)
		}
	}
	harness.CheckGangsAtRest(t, inv)
	t.Logf("evictions: %v", inv.Evictions())
}

// soakCycles is how many claim/return cycles TestSoak runs: one of each
// fault (six) in `make test`, more with `make soak` (SLUICE_SOAK_CYCLES).
func soakCycles(t *testing.T) int {
	if s := os.Getenv("SLUICE_SOAK_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_SOAK_CYCLES=%q: want a positive number", s)
		}
		return n
	}
	return 6
}

// soakApp is a Deployment of the soak, by namespace and name.
type soakApp struct{ ns, name string }

// soakProduction fills each of the four nodes with a Deployment of 4 x
// 2-GPU replicas pinned to the node and the overflow node, each under
// another kind of budget: a PDB (maxUnavailable 1), none (sluice's default
// budget, 25%), a PDB again, and, alone in namespace other, a PDB with an
// empty selector (every pod of its namespace; maxUnavailable 1).
func soakProduction(t *testing.T, cp *harness.ControlPlane, ns, other, overflowNode string, nodes []string) []soakApp {
	t.Helper()
	apps := []soakApp{{ns, "serve-0"}, {ns, "serve-1"}, {ns, "serve-2"}, {other, "serve-3"}}
	for i, a := range apps {
		d := pinned(harness.InferenceDeployment(a.ns, a.name, 4, 2), overflowNode, "", nodes[i])
		var pdb *policyv1.PodDisruptionBudget
		switch i {
		case 0, 2:
			pdb = harness.PDB(a.ns, a.name, intstr.FromInt32(1))
		case 3:
			pdb = harness.PDB(a.ns, "everything", intstr.FromInt32(1))
			pdb.Spec.Selector = &metav1.LabelSelector{}
		}
		harness.CreateDeployment(t, cp, d, pdb)
	}
	for i, a := range apps {
		waitPlaced(t, cp, a.ns, a.name, 4, func(node string) bool { return node == nodes[i] }, "on "+nodes[i])
	}
	return apps
}

// TestSoak runs claim/return cycles with a fault injected into each, in
// turn, at the claim's first eviction: the leader killed (SIGKILL), the
// overflow node NotReady (until the claim pauses), the disruption
// controller down (budgets frozen: the Eviction API refuses once they are
// spent, until it is back), a Deployment of the claimed leaf scaled up, a
// second gang claiming the other leaf at once, and a first gang ending
// (its production returning from the overflow node) as a second claims. Production runs under a PDB,
// under no PDB (sluice's default budget) and under a PDB with an empty
// selector. Every cycle must end with the gangs running and production
// back on its nodes, and the invariant watchers (one per namespace) must
// see no violation: no budget overdrawn, no eviction beyond the overflow
// room.
func TestSoak(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	other := harness.NewNamespace(t, cp.Client)
	nodes := cluster(t, cp, "sk", 1, 2, 2, 256, false)
	p := startPair(t, cp, ns, 2)
	apps := soakProduction(t, cp, ns, other, "sk-overflow", nodes)
	inv := harness.WatchInvariants(t, cp, ns, 256)
	invOther := harness.WatchInvariants(t, cp, other, 256)
	ev := watchEvictions(t, cp, ns)
	inv.Arm()
	invOther.Arm()
	faults := []string{"leader killed", "overflow node NotReady", "disruption controller down", "Deployment scaled mid-claim", "second claim at once", "returns during a claim"}
	injected := map[string]int{}
	cycles := soakCycles(t)
	start := time.Now()
	for cycle := range cycles {
		fault := faults[cycle%len(faults)]
		var returning []string
		if fault == "returns during a claim" {
			// A first gang holds one leaf, its production on the
			// overflow node; it ends at the second claim's first
			// eviction, and its production returns meanwhile.
			returning = researchGang(t, cp, ns, fmt.Sprintf("train-%d-first", cycle), 2, 8)
			harness.WaitForPodsBound(t, cp.Client, ns, returning...)
		}
		before := ev.count()
		hit := make(chan struct{})
		var once sync.Once
		var undo func()
		ev.mu.Lock()
		ev.hook = func(victim *v1.Pod) {
			once.Do(func() {
				defer close(hit)
				switch fault {
				case "leader killed":
					p.killLeader()
				case "overflow node NotReady":
					if err := setNodeReady(cp, "sk-overflow", v1.ConditionFalse); err != nil {
						t.Errorf("cycle %d: %v", cycle, err)
					}
					undo = func() {
						if err := setNodeReady(cp, "sk-overflow", v1.ConditionTrue); err != nil {
							t.Errorf("cycle %d: %v", cycle, err)
						}
					}
				case "disruption controller down":
					undo = harness.StopDisruptionController(t)
				case "returns during a claim":
					for _, name := range returning {
						if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
							t.Errorf("cycle %d: ending the first gang: %v", cycle, err)
						}
					}
				case "Deployment scaled mid-claim":
					app := victim.Labels["app"]
					if err := scale(cp, victim.Namespace, app, 5); err != nil {
						t.Errorf("cycle %d: scaling %s: %v", cycle, app, err)
					}
					undo = func() {
						if err := scale(cp, victim.Namespace, app, 4); err != nil {
							t.Errorf("cycle %d: scaling %s back: %v", cycle, app, err)
						}
					}
				}
			})
		}
		ev.mu.Unlock()
		gang := researchGang(t, cp, ns, fmt.Sprintf("train-%d", cycle), 2, 8)
		select {
		case <-hit:
			injected[fault]++
		case <-time.After(2 * harness.DefaultTimeout):
			t.Fatalf("cycle %d: no eviction", cycle)
		}
		if fault == "second claim at once" {
			gang = append(gang, researchGang(t, cp, ns, fmt.Sprintf("train-%d-b", cycle), 2, 8)...)
		}
		if fault == "overflow node NotReady" || fault == "disruption controller down" {
			// Held until the claim has stopped evicting because of it.
			waitClaim(t, cp, ns, "paused", func(c *v1alpha1.ResearchClaim) bool { return c.Status.Phase == v1alpha1.PhasePaused })
			undo()
		}
		harness.WaitForPodsBound(t, cp.Client, ns, gang...)
		if fault == "Deployment scaled mid-claim" {
			undo()
		}
		harness.CheckGangsAtRest(t, inv)
		harness.DeletePods(t, cp.Client, ns, gang...)
		for i, n := range nodes {
			waitPlaced(t, cp, apps[i].ns, apps[i].name, 4, func(node string) bool { return node == n }, fmt.Sprintf("back on %s (cycle %d)", n, cycle))
		}
		t.Logf("cycle %d (%s): %d evictions, done at %s", cycle, fault, ev.count()-before, time.Since(start).Round(time.Second))
	}
	violations := append(inv.Violations(), invOther.Violations()...)
	t.Logf("soak: %d cycles, faults injected %v, evictions %v and %v, %d budget overdrafts, %d violations", cycles, injected,
		inv.Evictions(), invOther.Evictions(), inv.Overdrafts()+invOther.Overdrafts(), len(violations))
}

func scale(cp *harness.ControlPlane, ns, name string, replicas int32) error {
	// The Deployment controller writes the object too: read and write
	// again on a conflict, as kubectl scale does.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cp.Client.AppsV1().Deployments(ns).GetScale(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = cp.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), name, s, metav1.UpdateOptions{})
		return err
	})
}
