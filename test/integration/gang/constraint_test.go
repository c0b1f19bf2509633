// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestNativeTopologyConstraint: a native PodGroup whose
// spec.schedulingConstraints.topology names the leaf label requires one
// leaf, whatever sluice's default (any level, preferred) says. On 2 leaves
// x 4 nodes with 3 nodes of each leaf taken, a 2-node gang fits the
// cluster but no leaf: it is never placed across leaves, and its PodGroup
// says why in numbers. Once a leaf has room it is placed, inside it.
func TestNativeTopologyConstraint(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	fabricNodes(t, cp, "tc", 1, 2, 4)
	occupy(t, cp, ns, "tc-s0l0n0", "tc-s0l0n1", "tc-s0l0n2", "tc-s0l1n0", "tc-s0l1n1", "tc-s0l1n2")
	harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))

	pg := harness.NativePodGroup(ns, "leafonly", 2, nil)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: configv1.DefaultLeafLabel}},
	}
	harness.CreateNativePodGroup(t, cp.Client, pg)
	var pods []string
	for i := range 2 {
		name := fmt.Sprintf("leafonly-%d", i)
		harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(8).SchedulingGroup("leafonly").Obj())
		pods = append(pods, name)
	}
	across := harness.ExpectNeverBound(t, cp.Client, ns, pods...)
	harness.WaitForEvent(t, cp.Client, ns, "PodGroup", "leafonly", "NoFabricDomain", "needs one leaf with room for 2 pods")
	across()

	// A leaf gains room: the gang goes there, whole.
	harness.DeletePods(t, cp.Client, ns, "filler-tc-s0l1n1")
	bound := harness.WaitForPodsBound(t, cp.Client, ns, pods...)
	if leaves := leaves(bound); len(leaves) != 1 || leaves[0] != "s0l1" {
		t.Errorf("gang on leaves %v, want [s0l1]", leaves)
	}
}

// TestUnknownTopologyKey: a constraint on a label that is no fabric level
// is refused with an Event naming the field and the keys that would work.
func TestUnknownTopologyKey(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	fabricNodes(t, cp, "tk", 1, 1, 2)
	harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
	pg := harness.NativePodGroup(ns, "rack", 2, nil)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: "topology.kubernetes.io/rack"}},
	}
	harness.CreateNativePodGroup(t, cp.Client, pg)
	var pods []string
	for i := range 2 {
		name := fmt.Sprintf("rack-%d", i)
		harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(8).SchedulingGroup("rack").Obj())
		pods = append(pods, name)
	}
	harness.ExpectNeverBound(t, cp.Client, ns, pods...)
	harness.WaitForEvent(t, cp.Client, ns, "PodGroup", "rack", "InvalidFabricRequest",
		"spec.schedulingConstraints.topology[0].key", `"topology.kubernetes.io/rack"`, configv1.DefaultLeafLabel)
}
