// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"fmt"
	"sort"
	"testing"

	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestTopologyConfPlacesGangsLikeLabels: the live Slurm's topology.conf
// (leaf1 = gpu01-04, leaf2 = gpu05-08, one spine) as the fabric source
// places gangs exactly as node labels describing the same tree do.
func TestTopologyConfPlacesGangsLikeLabels(t *testing.T) {
	eachSlurm(t, testTopologyConfPlacesGangsLikeLabels)
}

func testTopologyConfPlacesGangsLikeLabels(t *testing.T, env slurmEnv) {
	if env.topology == "" {
		t.Fatal("slurm.env has no SLURM_TOPOLOGY_CONF; re-run hack/slurm-up.sh")
	}
	leafOf := func(node string) string {
		if node <= "gpu04" {
			return "leaf1"
		}
		return "leaf2"
	}
	// gpu01 and gpu02 are busy: leaf1 has 2 free nodes, leaf2 has 4.
	// A 2-node gang fits leaf1 exactly (best fit); a 4-node gang needs leaf2.
	run := func(t *testing.T, fabric configv1.FabricConfig, withLabels bool) []string {
		cp := harness.Shared(t)
		ns := harness.NewNamespace(t, cp.Client)
		labels := map[string]string{}
		if withLabels {
			labels[configv1.DefaultSpineLabel] = "spine"
		}
		slurmNodes(t, cp, labels)
		if withLabels {
			for i := 1; i <= 8; i++ {
				node := fmt.Sprintf("gpu%02d", i)
				patchLabel(t, cp, node, configv1.DefaultLeafLabel, leafOf(node))
			}
		}
		for _, n := range []string{"gpu01", "gpu02"} {
			harness.CreatePods(t, cp.Client, harness.Pod(ns, "busy-"+n).GPUs(8).OnNode(n).Obj())
		}
		cfg := harness.LoadShippedConfig(t)
		harness.SetPluginArgs(t, cfg, "sluice-research", "FabricTopology", &configv1.FabricTopologyArgs{Fabric: &fabric})
		harness.StartScheduler(t, cp, cfg)
		var placed []string
		for _, g := range []struct {
			name string
			pods int
		}{{"two", 2}, {"four", 4}} {
			harness.CreateNativePodGroup(t, cp.Client, harness.NativePodGroup(ns, g.name, int32(g.pods), nil))
			var names []string
			for i := 0; i < g.pods; i++ {
				name := fmt.Sprintf("%s-%d", g.name, i)
				harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(8).SchedulingGroup(g.name).Obj())
				names = append(names, name)
			}
			bound := harness.WaitForPodsBound(t, cp.Client, ns, names...)
			leaves := map[string]bool{}
			for _, node := range bound {
				leaves[leafOf(node)] = true
			}
			for l := range leaves {
				placed = append(placed, g.name+"@"+l)
			}
		}
		sort.Strings(placed)
		return placed
	}
	levels := []configv1.FabricLevel{{Name: "leaf", NodeLabel: configv1.DefaultLeafLabel}, {Name: "spine", NodeLabel: configv1.DefaultSpineLabel}}
	var fromConf, fromLabels []string
	t.Run("topology.conf", func(t *testing.T) {
		fromConf = run(t, configv1.FabricConfig{Source: "SlurmTopology", SlurmTopologyFile: ptr.To(env.topology), Levels: levels}, false)
	})
	t.Run("labels", func(t *testing.T) {
		fromLabels = run(t, configv1.FabricConfig{Source: "NodeLabels", Levels: levels}, true)
	})
	want := []string{"four@leaf2", "two@leaf1"}
	if fmt.Sprint(fromConf) != fmt.Sprint(want) || fmt.Sprint(fromLabels) != fmt.Sprint(want) {
		t.Errorf("placements: topology.conf %v, labels %v; want both %v", fromConf, fromLabels, want)
	}
}
