// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
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
// plugin makes it: slots of every node from its NodeInfo, the overlay, and
// the search (first attempt: the lowest fitting level; ladder: also the
// fallbacks above it).
func BenchmarkDecide(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		tree, infos := cluster(b, nodes)
		pl := &FabricTopology{gpu: "nvidia.com/gpu"}
		for _, g := range []struct{ pods, gpus int }{{4, 8}, {32, 8}, {64, 8}} {
			for _, first := range []bool{true, false} {
				name := "first-attempt"
				if !first {
					name = "ladder"
				}
				b.Run(fmt.Sprintf("nodes=%d/gang=%dx%dGPU/%s", nodes, g.pods, g.gpus, name), func(b *testing.B) {
					template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": fmt.Sprint(g.gpus)}).Obj()
					plan := gangPlan{request: gang.FabricRequest{Level: "any", Mode: config.FabricModePreferred}, pods: g.pods, template: template}
					for b.Loop() {
						if d := pl.decide(tree, infos, plan, first); len(d.candidates) == 0 {
							b.Fatalf("no placement: %s", d.explanation)
						}
					}
				})
			}
		}
	}
}

// TestFirstAttempt: a gang's first attempt gets only the lowest level's
// candidates; later attempts get the whole ladder, the lowest level first.
func TestFirstAttempt(t *testing.T) {
	tree, infos := cluster(t, 1000)
	pl := &FabricTopology{gpu: "nvidia.com/gpu"}
	template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Obj()
	plan := gangPlan{request: gang.FabricRequest{Level: "any", Mode: config.FabricModePreferred}, pods: 4, template: template}
	ladder := pl.decide(tree, infos, plan, false)
	first := pl.decide(tree, infos, plan, true)
	if len(first.candidates) == 0 || len(first.candidates) > candidatesAtLowest || len(first.candidates) >= len(ladder.candidates) {
		t.Fatalf("first attempt: %d candidates, ladder: %d", len(first.candidates), len(ladder.candidates))
	}
	for i, c := range first.candidates {
		if c.Domain != ladder.candidates[i].Domain {
			t.Errorf("candidate %d: first attempt %s, ladder %s", i, c.Domain.Name, ladder.candidates[i].Domain.Name)
		}
		if c.Domain.Level != first.candidates[0].Domain.Level {
			t.Errorf("first attempt offers %s above the lowest level", c.Domain.Name)
		}
	}
}

// external is a capacity.External that takes every GPU of the nodes in
// drained; gen is its generation.
type external struct {
	drained map[string]bool
	gen     uint64
	calls   int
}

func (e *external) NodeExternal(node *v1.Node) (bool, map[v1.ResourceName]int64) {
	e.calls++
	return !e.drained[node.Name], nil
}

func (e *external) Generation() uint64 { return e.gen }

// TestSlotCacheWithExternal: slot counts are cached under the External's
// generation too, so a node Slurm drains has no slots as soon as the
// generation changes, and nothing is asked twice while it does not.
func TestSlotCacheWithExternal(t *testing.T) {
	tree, infos := cluster(t, 64)
	template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj()
	ext := &external{drained: map[string]bool{}, gen: 1}
	var c slotCache
	first, _ := c.of(tree, infos, template, ext)
	if ext.calls != len(infos) {
		t.Fatalf("first count asked the External %d times, want %d", ext.calls, len(infos))
	}
	i, _ := tree.NodeIndex("n00003")
	if first[i] == 0 {
		// Make n00003 have room, so draining it shows.
		t.Fatalf("n00003 has no slots before the drain; pick another node")
	}
	ext.drained["n00003"] = true
	if again, _ := c.of(tree, infos, template, ext); again[i] != first[i] || ext.calls != len(infos) {
		t.Fatalf("same generation: slots %d (want the cached %d), %d External calls (want %d)", again[i], first[i], ext.calls, len(infos))
	}
	ext.gen++
	if after, _ := c.of(tree, infos, template, ext); after[i] != 0 {
		t.Errorf("after the drain (new generation): n00003 has %d slots, want 0", after[i])
	}
}

// TestSlotCacheFollowsTheList: the cache remembers where each NodeInfo of
// the last list sits in the tree; a list in another order, a shorter one,
// or one where a NodeInfo was replaced gets the same slots and NodeInfos
// as a fresh count would.
func TestSlotCacheFollowsTheList(t *testing.T) {
	tree, infos := cluster(t, 256)
	template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "2"}).Obj()
	var c slotCache
	c.of(tree, infos, template, nil)
	shuffled := append([]fwk.NodeInfo(nil), infos...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	replaced := append([]fwk.NodeInfo(nil), infos...)
	full := framework.NewNodeInfo(st.MakePod().Name("full").UID("full").Node("n00007").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "8"}).Obj())
	full.SetNode(infos[7].Node())
	replaced[7] = full
	// moving holds n00009, then (SetNode) n00010's node.
	moving := framework.NewNodeInfo()
	moving.SetNode(infos[9].Node())
	withMoving := append([]fwk.NodeInfo(nil), infos...)
	withMoving[9] = moving
	check := func(name string, list []fwk.NodeInfo) {
		t.Helper()
		asFresh(t, name, &c, tree, list, template)
	}
	check("shuffled", shuffled)
	check("shorter", infos[:100])
	check("replaced", replaced)
	check("again", infos)
	check("moving", withMoving)
	moving.SetNode(infos[10].Node())
	check("moved", withMoving)
	if s, _ := c.of(tree, replaced, template, nil); s[7] != 0 {
		t.Errorf("n00007, all 8 GPUs taken: %d slots", s[7])
	}
}

// TestSlotCacheKeepsCopies: a copy of a NodeInfo (the scheduler's
// snapshot and preemption's simulations copy every node) is taken from the
// cache, not counted again, and so are the originals after it; a copy
// that changed is counted again.
func TestSlotCacheKeepsCopies(t *testing.T) {
	tree, infos := cluster(t, 256)
	template := st.MakePod().Name("m").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "2"}).Obj()
	var c slotCache
	c.of(tree, infos, template, nil)
	copies := make([]fwk.NodeInfo, len(infos))
	for i, ni := range infos {
		copies[i] = ni.Snapshot()
	}
	// A victim leaves one node's copy (a new generation).
	victim := copies[slices.IndexFunc(copies, func(ni fwk.NodeInfo) bool { return len(ni.GetPods()) > 0 })].(*framework.NodeInfo)
	if err := victim.RemovePod(klog.Background(), victim.Pods[0].GetPod()); err != nil {
		t.Fatal(err)
	}
	check := func(name string, list []fwk.NodeInfo, counted int) {
		t.Helper()
		if got := asFresh(t, name, &c, tree, list, template); got != counted {
			t.Errorf("%s: %d nodes counted, want %d", name, got, counted)
		}
	}
	check("copies", copies, 1)
	check("originals", infos, 1)
}

// asFresh checks that c gives the slots and NodeInfos a fresh cache gives
// for list, and returns how many nodes c counted (did not take from its
// cache).
func asFresh(t *testing.T, name string, c *slotCache, tree *fabric.Tree, list []fwk.NodeInfo, template *v1.Pod) int {
	t.Helper()
	before := c.counted
	var fresh slotCache
	wantSlots, wantInfos := fresh.of(tree, list, template, nil)
	gotSlots, gotInfos := c.of(tree, list, template, nil)
	for i := range tree.NumNodes() {
		if gotSlots[i] != wantSlots[i] || gotInfos[i] != wantInfos[i] {
			t.Errorf("%s: node %s: cached %d slots (NodeInfo %p), fresh %d (%p)", name, tree.Node(i).Name, gotSlots[i], gotInfos[i], wantSlots[i], wantInfos[i])
		}
	}
	return c.counted - before
}
