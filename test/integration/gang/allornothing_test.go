// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/test/harness"
)

// boundCount is how many of the pods are bound.
func boundCount(t *testing.T, cp *harness.ControlPlane, ns string, pods []string) int {
	t.Helper()
	n := 0
	for _, name := range pods {
		p, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// TestCompetingGangs: two gangs of 12 x 8 GPUs on 16 nodes together exceed
// the cluster. One is placed whole, the other binds nothing (no deadlock, no
// partial placement), and it is placed whole once the first one finishes.
func TestCompetingGangs(t *testing.T) {
	for _, api := range apis {
		t.Run(apiName(api), func(t *testing.T) {
			cp := harness.Shared(t)
			ns := harness.NewNamespace(t, cp.Client)
			fabricNodes(t, cp, "cg"+apiName(api)[:1], 2, 2, 4)
			harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
			// Until the winner is deleted, both gangs never have pods bound
			// at the same time: checked at every pod change.
			var violations harness.Violations
			var winnerRuns atomic.Bool
			winnerRuns.Store(true)
			members := map[string]string{} // pod -> gang
			for i := 0; i < 12; i++ {
				members[fmt.Sprintf("a-%d", i)] = "a"
				members[fmt.Sprintf("b-%d", i)] = "b"
			}
			bound := map[string]map[string]bool{"a": {}, "b": {}}
			harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
				p := e.Pod()
				g, ok := members[p.Name]
				if !ok {
					return
				}
				if e.New != nil && e.New.Spec.NodeName != "" {
					bound[g][p.Name] = true
				} else {
					delete(bound[g], p.Name)
				}
				if winnerRuns.Load() && len(bound["a"]) > 0 && len(bound["b"]) > 0 {
					violations.Addf("gangs a and b both have pods bound (%d and %d of 12): not all or nothing", len(bound["a"]), len(bound["b"]))
				}
			})
			a := createGang(t, cp, ns, api, gangSpec{name: "a", pods: 12, gpus: 8, timeout: 5})
			b := createGang(t, cp, ns, api, gangSpec{name: "b", pods: 12, gpus: 8, timeout: 5})

			var winner, loser []string
			harness.Eventually(t, 2*harness.DefaultTimeout, func(context.Context) (bool, error) {
				na, nb := boundCount(t, cp, ns, a), boundCount(t, cp, ns, b)
				switch {
				case na == 12:
					winner, loser = a, b
				case nb == 12:
					winner, loser = b, a
				}
				return winner != nil, nil
			}, func() string {
				return fmt.Sprintf("no gang fully bound: a has %d, b has %d of 12", boundCount(t, cp, ns, a), boundCount(t, cp, ns, b))
			})
			// The scheduler has tried the loser against the winner's
			// placement and refused it.
			harness.WaitForEvent(t, cp.Client, ns, "Pod", loser[0], "FailedScheduling")
			// The winner finishes: the loser is placed whole.
			winnerRuns.Store(false)
			for _, name := range winner {
				if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
					t.Fatal(err)
				}
			}
			harness.WaitForPodsBound(t, cp.Client, ns, loser...)
			violations.Check(t)
		})
	}
}

// TestGangTimeoutReleasesMembers: a label gang whose last member cannot be
// scheduled (it is held by a scheduling gate) keeps its placed members
// waiting only for scheduleTimeoutSeconds; then they are released, nothing
// binds, and their GPUs serve other pods.
func TestGangTimeoutReleasesMembers(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	harness.CreateNodes(t, cp.Client,
		harness.GPUNode("timeout-n0", 8).Fabric("l0", "s0", "b0").Obj(),
		harness.GPUNode("timeout-n1", 8).Fabric("l0", "s0", "b0").Obj(),
		harness.GPUNode("timeout-n2", 8).Fabric("l0", "s0", "b0").Obj())
	cfg := harness.LoadShippedConfig(t)
	// A long backoff keeps the released gang away while other pods take its
	// GPUs.
	harness.SetPluginArgs(t, cfg, "sluice-research", "Gang", &gangArgsV1{DefaultScheduleTimeoutSeconds: ptr.To[int64](60), RejectedGangBackoffSeconds: ptr.To[int64](300)})
	harness.StartScheduler(t, cp, cfg)

	members := createGang(t, cp, ns, gang.Label, gangSpec{name: "held", pods: 3, gpus: 8, timeout: 3, gated: 1})
	// The two ungated members take two nodes' GPUs and wait at Permit for
	// 3 s; the first to time out releases the other.
	harness.WaitForEvent(t, cp.Client, ns, "PodGroup", "held", "GangRejected", "released 1 waiting members")
	if n := boundCount(t, cp, ns, members); n != 0 {
		t.Fatalf("%d members bound, want 0", n)
	}
	// All three nodes' GPUs are free again.
	var after []string
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("after-%d", i)
		harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(8).Obj())
		after = append(after, name)
	}
	harness.WaitForPodsBound(t, cp.Client, ns, after...)
	if n := boundCount(t, cp, ns, members); n != 0 {
		t.Fatalf("%d members bound after release, want 0", n)
	}
}

// TestInvalidFabricAnnotation: a bad fabric-level value gets an Event on the
// PodGroup and on its pods naming the value, and the gang is not scheduled.
func TestInvalidFabricAnnotation(t *testing.T) {
	for _, api := range apis {
		t.Run(apiName(api), func(t *testing.T) {
			cp := harness.Shared(t)
			ns := harness.NewNamespace(t, cp.Client)
			fabricNodes(t, cp, "inv"+apiName(api)[:1], 1, 1, 2)
			harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
			pods := createGang(t, cp, ns, api, gangSpec{name: "bad", pods: 2, gpus: 8,
				annotations: map[string]string{gang.FabricLevelAnnotation: "rack"}})
			harness.WaitForEvent(t, cp.Client, ns, "PodGroup", "bad", "InvalidFabricRequest", `"rack"`, gang.FabricLevelAnnotation)
			harness.WaitForEvent(t, cp.Client, ns, "Pod", pods[0], "InvalidFabricRequest", `"rack"`)
			harness.ExpectNeverBound(t, cp.Client, ns, pods...)
		})
	}
}
