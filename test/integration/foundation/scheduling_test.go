// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/test/harness"
)

// TestProfilesBindOnlyTheirPods: sluice binds pods that name one of its
// profiles and leaves every other pod alone (here no default scheduler runs,
// so those stay pending), and reports itself as the scheduler in the event.
func TestProfilesBindOnlyTheirPods(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("bind-n1", 8).Obj(), harness.GPUNode("bind-n2", 8).Obj())
	harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))

	harness.ExpectNeverBound(t, cp.Client, ns, "default", "other")
	harness.CreatePods(t, cp.Client,
		harness.Pod(ns, "production").Scheduler("sluice-production").GPUs(1).Obj(),
		harness.Pod(ns, "research").Scheduler("sluice-research").GPUs(1).Obj(),
		harness.Pod(ns, "default").Scheduler("default-scheduler").GPUs(1).Obj(),
		harness.Pod(ns, "other").Scheduler("someone-else").Obj(),
	)
	harness.WaitForPodsBound(t, cp.Client, ns, "production", "research")

	for pod, profile := range map[string]string{"production": "sluice-production", "research": "sluice-research"} {
		want := fmt.Sprintf("Scheduled by %s", profile)
		harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
			events, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Regarding.Name == pod && e.Reason == "Scheduled" && e.ReportingController == profile {
					return true, nil
				}
			}
			return false, nil
		}, func() string { return want + ": no Scheduled event reported by " + profile })
	}
}

// TestProductionPacksGPUs: the production profile packs GPU pods, so two
// 1-GPU pods share one 8-GPU node and the other nodes stay whole.
func TestProductionPacksGPUs(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	harness.CreateNodes(t, cp.Client,
		harness.GPUNode("pack-n1", 8).Obj(), harness.GPUNode("pack-n2", 8).Obj(),
		harness.GPUNode("pack-n3", 8).Obj(), harness.GPUNode("pack-n4", 8).Obj())
	harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))

	harness.CreatePods(t, cp.Client, harness.Pod(ns, "first").GPUs(1).Obj())
	first := harness.WaitForPodsBound(t, cp.Client, ns, "first")["first"]
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "second").GPUs(1).Obj())
	second := harness.WaitForPodsBound(t, cp.Client, ns, "second")["second"]
	if first != second {
		t.Errorf("1-GPU production pods on %s and %s, want both on one node (packing)", first, second)
	}
}

// TestProductionChecksGPUsFirst: in the production profile InferencePacking
// is the first filter, so a node without room for a pod's GPUs is turned
// away before NodeResourcesFit checks every resource there; the research
// profile keeps the default order.
func TestProductionChecksGPUsFirst(t *testing.T) {
	cp := harness.Shared(t)
	s := harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
	production := s.Filters("sluice-production")
	if len(production) == 0 || production[0] != "InferencePacking" || !slices.Contains(production, "NodeResourcesFit") {
		t.Errorf("sluice-production's filters are %v, want InferencePacking first and NodeResourcesFit after it", production)
	}
	research := s.Filters("sluice-research")
	if len(research) == 0 || research[0] == "InferencePacking" || !slices.Contains(research, "NodeResourcesFit") {
		t.Errorf("sluice-research's filters are %v, want the default order, NodeResourcesFit among them", research)
	}
}
