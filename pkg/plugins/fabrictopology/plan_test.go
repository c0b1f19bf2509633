// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// cluster builds nodes x 8-GPU nodes, 32 a leaf, 8 leaves a spine, 4
// spines a block, with a random 0-8 GPUs of each taken.
func cluster(tb testing.TB, nodes int) (*fabric.Tree, []fwk.NodeInfo) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var fnodes []fabric.Node
	var infos []fwk.NodeInfo
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i)
		fnodes = append(fnodes, fabric.Node{Name: name, Switches: []string{fmt.Sprintf("l%d", i/32), fmt.Sprintf("s%d", i/256), fmt.Sprintf("b%d", i/1024)}})
		node := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}).Obj()
		var pods []*v1.Pod
		if used := rng.IntN(9); used > 0 {
			pods = append(pods, st.MakePod().Name(name+"-p").UID(name+"-p").Node(name).Req(map[v1.ResourceName]string{"nvidia.com/gpu": fmt.Sprint(used)}).Obj())
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(node)
		infos = append(infos, ni)
	}
	tree, err := fabric.Build([]string{"leaf", "spine", "block"}, fnodes)
	if err != nil {
		tb.Fatal(err)
	}
	return tree, infos
}

// BenchmarkDecide measures FabricTopology's whole per-gang decision as the
// plugin makes it: slots of every node from its NodeInfo, the overlay, the
// search at the lowest fitting level and the fallbacks above it.
func BenchmarkDecide(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		tree, infos := cluster(b, nodes)
		pl := &FabricTopology{gpu: "nvidia.com/gpu", args: &config.FabricTopologyArgs{}}
		for _, g := range []struct{ pods, gpus int }{{4, 8}, {32, 8}, {64, 8}} {
			b.Run(fmt.Sprintf("nodes=%d/gang=%dx%dGPU", nodes, g.pods, g.gpus), func(b *testing.B) {
				template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": fmt.Sprint(g.gpus)}).Obj()
				plan := gangPlan{request: gang.FabricRequest{Level: "any", Mode: config.FabricModePreferred}, pods: g.pods, template: template}
				for b.Loop() {
					if d := pl.decide(tree, infos, plan); len(d.candidates) == 0 {
						b.Fatalf("no placement: %s", d.explanation)
					}
				}
			})
		}
	}
}

// TestLowestLevel keeps the first attempt's placements to the lowest
// level's candidates.
func TestLowestLevel(t *testing.T) {
	tree, infos := cluster(t, 1000)
	pl := &FabricTopology{gpu: "nvidia.com/gpu", args: &config.FabricTopologyArgs{}}
	template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Obj()
	d := pl.decide(tree, infos, gangPlan{request: gang.FabricRequest{Level: "any", Mode: config.FabricModePreferred}, pods: 4, template: template})
	if len(d.candidates) < 2 {
		t.Fatalf("want a ladder of candidates, got %d", len(d.candidates))
	}
	lowest := lowestLevel(d.candidates)
	if len(lowest) == 0 || len(lowest) > candidatesAtLowest || len(lowest) == len(d.candidates) {
		t.Fatalf("lowestLevel kept %d of %d candidates", len(lowest), len(d.candidates))
	}
	for _, c := range lowest {
		if c.Domain.Level != d.candidates[0].Domain.Level {
			t.Errorf("candidate %s at level %d, want %d", c.Domain.Name, c.Domain.Level, d.candidates[0].Domain.Level)
		}
	}
}
