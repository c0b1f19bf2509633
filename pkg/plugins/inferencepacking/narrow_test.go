// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func withPriority(p *v1.Pod, priority int32) *v1.Pod {
	p.Spec.Priority = &priority
	return p
}

// preFilterNames runs PreFilter and returns the nodes it named, nil for
// every node.
func preFilterNames(t *testing.T, pl *InferencePacking, incoming *v1.Pod, infos []fwk.NodeInfo) []string {
	t.Helper()
	result, s := pl.PreFilter(context.Background(), framework.NewCycleState(), incoming, infos)
	if !s.IsSuccess() && !s.IsSkip() {
		t.Fatalf("PreFilter: %v", s)
	}
	if result.AllNodes() {
		return nil
	}
	if s.IsSkip() {
		t.Fatalf("PreFilter named nodes %v but skipped: the scheduler drops the names of a plugin that skips", sets.List(result.NodeNames))
	}
	return sets.List(result.NodeNames)
}

// TestPreFilterNamesTheNodesWithRoom: when at most a third of the nodes
// have room for a pod's GPUs, PreFilter names them: free GPUs enough, or
// GPUs held by pods of lower priority (which preemption may evict); never a
// node without GPUs. Otherwise, or when none has room, it names none
// (every node).
func TestPreFilterNamesTheNodesWithRoom(t *testing.T) {
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 8 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "leaf-a"))
		running = append(running, withPriority(pod("serve-"+name, name, "production", "8"), 10000))
	}
	nodes = append(nodes, node("n08", "leaf-b"), node("n09", "leaf-b"), node("n10", "leaf-b"),
		st.MakeNode().Name("n11").Label("leaf", "leaf-b").Capacity(map[v1.ResourceName]string{"cpu": "64", "pods": "110"}).Obj())
	running = append(running,
		withPriority(pod("train-n08", "n08", "research", "8"), 100),
		withPriority(pod("serve-n09", "n09", "production", "4"), 10000))
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		incoming *v1.Pod
		want     []string
	}{
		{"8 GPUs: the free node and the one research holds", withPriority(pod("x", "", "production", "8"), 10000), []string{"n08", "n10"}},
		{"4 GPUs: and the half-free node", withPriority(pod("x", "", "production", "4"), 10000), []string{"n08", "n09", "n10"}},
		{"lowest priority: no preemption, free GPUs only", withPriority(pod("x", "", "production", "1"), 0), []string{"n09", "n10"}},
		{"no GPUs: every node", withPriority(st.MakePod().Name("x").Namespace("ns").Obj(), 10000), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := preFilterNames(t, pl, tc.incoming, infos); !slices.Equal(got, tc.want) {
				t.Errorf("PreFilter named %v, want %v", got, tc.want)
			}
		})
	}

	// More than a third with room (5 of 12): every node.
	freed := slices.DeleteFunc(slices.Clone(running), func(p *v1.Pod) bool { return p.Name == "serve-n00" || p.Name == "serve-n01" })
	pl, snapshot = newPlugin(t, nodes, freed)
	if infos, err = snapshot.NodeInfos().List(); err != nil {
		t.Fatal(err)
	}
	if got := preFilterNames(t, pl, withPriority(pod("x", "", "production", "4"), 10000), infos); got != nil {
		t.Errorf("5 of 12 nodes have room: PreFilter named %v, want every node", got)
	}
	// None with room: every node, so that the scheduler says why.
	pl, snapshot = newPlugin(t, nodes[:8], running[:8])
	if infos, err = snapshot.NodeInfos().List(); err != nil {
		t.Fatal(err)
	}
	if got := preFilterNames(t, pl, withPriority(pod("x", "", "production", "8"), 10000), infos); got != nil {
		t.Errorf("no node has room: PreFilter named %v, want every node", got)
	}
}

// nineNodes is a leaf of nine 8-GPU nodes n00-n08, the first free of them
// free and each other one serving an 8-GPU production pod, serve-<node>.
func nineNodes(t *testing.T, free int) (*InferencePacking, *cache.Snapshot, []fwk.NodeInfo) {
	t.Helper()
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 9 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "leaf-a"))
		if i >= free {
			running = append(running, withPriority(pod("serve-"+name, name, "production", "8"), 10000))
		}
	}
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	return pl, snapshot, infos
}

// TestPreFilterSeesChangesNotHinted: a node freed by something this
// profile did not do (a pod deleted) is named in the very next cycle, not
// a rescan later: PreFilter reads every node's generation.
func TestPreFilterSeesChangesNotHinted(t *testing.T) {
	pl, _, infos := nineNodes(t, 1)
	incoming := withPriority(pod("x", "", "production", "8"), 10000)
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00"}; !slices.Equal(got, want) {
		t.Fatalf("PreFilter named %v, want %v", got, want)
	}
	// n05's pod goes; the plugin's clock does not move, so no periodic
	// rescan covers it.
	for _, ni := range infos {
		if ni.Node().Name == "n05" {
			if err := ni.(*framework.NodeInfo).RemovePod(klogDiscard(), ni.GetPods()[0].GetPod()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00", "n05"}; !slices.Equal(got, want) {
		t.Errorf("after n05's pod was deleted, PreFilter named %v, want %v", got, want)
	}
}

// TestPreFilterNeverLeavesOutANodeThatFits checks, against upstream's
// NodeResourcesFit, that every node PreFilter leaves out is one
// NodeResourcesFit rejects, and would still reject after preemption evicted
// every pod of lower priority than the incoming one: leaving it out
// changes neither where the pod may go nor whom preemption may evict. One
// plugin follows one mostly full cluster whose nodes change in place for
// 300 rounds (pods bound and deleted, some hinted by Reserve, some not),
// so its incremental reads are checked too, and its estimate's counts
// against a recount.
func TestPreFilterNeverLeavesOutANodeThatFits(t *testing.T) {
	ctx := context.Background()
	fit := nodeResourcesFit(t)
	fits := func(incoming *v1.Pod, ni fwk.NodeInfo) bool { return fit(incoming, ni).IsSuccess() }
	rng := rand.New(rand.NewPCG(3, 4))
	priorities := []int32{100, 10000, 30000, 30000}
	serial := 0
	newPod := func(node string) *v1.Pod {
		serial++
		name := fmt.Sprintf("p%d", serial)
		req := map[v1.ResourceName]string{"cpu": fmt.Sprint(1 + rng.IntN(6))}
		if rng.IntN(6) > 0 { // some pods hold no GPUs, of any priority
			req["nvidia.com/gpu"] = fmt.Sprint([]int{1, 2, 4, 8, 8}[rng.IntN(5)])
		}
		p := st.MakePod().Name(name).Namespace("ns").UID(name).Node(node).Req(req).Obj()
		p.Spec.PriorityClassName = []string{"research", "production"}[rng.IntN(2)]
		return withPriority(p, priorities[rng.IntN(len(priorities))])
	}
	var nodes []*v1.Node
	var running []*v1.Pod
	for i := range 30 {
		name := fmt.Sprintf("n%02d", i)
		gpus := []string{"8", "8", "8", "4", ""}[rng.IntN(5)]
		capacity := map[v1.ResourceName]string{"cpu": "16", "memory": "64Gi", "pods": "110"}
		if gpus != "" {
			capacity["nvidia.com/gpu"] = gpus
		}
		nodes = append(nodes, st.MakeNode().Name(name).Label("leaf", fmt.Sprintf("leaf-%d", i/8)).Capacity(capacity).Obj())
		for range 2 + rng.IntN(3) {
			running = append(running, newPod(name))
		}
	}
	pl, snapshot := newPlugin(t, nodes, running)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	narrowed, leftOut := 0, 0
	for round := range 300 {
		// Change a few nodes in place: a pod bound (hinted by Reserve or
		// not, as another profile's would be) or one deleted.
		for range rng.IntN(4) {
			ni := infos[rng.IntN(len(infos))].(*framework.NodeInfo)
			if pods := ni.GetPods(); len(pods) > 0 && rng.IntN(2) == 0 {
				if err := ni.RemovePod(klogDiscard(), pods[rng.IntN(len(pods))].GetPod()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			p := newPod(ni.Node().Name)
			ni.AddPod(p)
			if rng.IntN(2) == 0 {
				if s := pl.Reserve(ctx, framework.NewCycleState(), p, ni.Node().Name); !s.IsSuccess() {
					t.Fatal(s)
				}
			}
		}
		incoming := withPriority(st.MakePod().Name("x").Namespace("ns").UID("x").
			Req(map[v1.ResourceName]string{"cpu": "1", "nvidia.com/gpu": fmt.Sprint([]int{1, 2, 4, 8}[rng.IntN(4)])}).Obj(), []int32{50, 5000, 20000}[rng.IntN(3)])
		names := preFilterNames(t, pl, incoming, infos)
		if rng.IntN(2) == 0 {
			if s := pl.PreScore(ctx, framework.NewCycleState(), incoming, infos); !s.IsSuccess() {
				t.Fatal(s)
			}
		}
		if names == nil {
			continue
		}
		narrowed++
		// PreFilter read every node: its counts are exact.
		want := make([]int32, maxNarrowGPUs+1)
		for _, ni := range infos {
			if alloc := ni.GetAllocatable().GetScalarResources()["nvidia.com/gpu"]; alloc > 0 {
				want[min(max(alloc-ni.GetRequested().GetScalarResources()["nvidia.com/gpu"], 0), maxNarrowGPUs)]++
			}
		}
		pl.mu.Lock()
		got := slices.Clone(pl.byFree)
		pl.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: nodes by free GPUs %v, a recount says %v", round, got, want)
		}
		named := sets.New(names...)
		for _, ni := range infos {
			n := ni.Node()
			if named.Has(n.Name) {
				continue
			}
			leftOut++
			if fits(incoming, ni) {
				t.Fatalf("round %d: PreFilter left out %s, where NodeResourcesFit fits the %s-GPU pod", round, n.Name, incoming.Spec.Containers[0].Resources.Requests.Name("nvidia.com/gpu", "").String())
			}
			// What preemption would leave: the pods of the same or a
			// higher priority.
			after := framework.NewNodeInfo()
			after.SetNode(n)
			for _, p := range ni.GetPods() {
				if *p.GetPod().Spec.Priority >= *incoming.Spec.Priority {
					after.AddPod(p.GetPod())
				}
			}
			if fits(incoming, after) {
				t.Fatalf("round %d: PreFilter left out %s, where the pod fits once pods of lower priority are evicted", round, n.Name)
			}
		}
	}
	// The checks above must have had something to check.
	if narrowed < 30 || leftOut < 300 {
		t.Fatalf("PreFilter named nodes in %d of 300 rounds, leaving out %d nodes: too few to check", narrowed, leftOut)
	}
	t.Logf("PreFilter named nodes in %d of 300 rounds, leaving out %d nodes", narrowed, leftOut)
}

// groupCycle marks a cycle state as a pod group's.
type groupCycle struct{ fwk.PodGroupCycleState }

// TestPreFilterForgetsWhatAPodGroupCycleSaw: in a pod group's cycle the
// snapshot holds the group's pods assumed under the NodeInfo's old
// generation, and forgets them under it too. A node first read then must
// be read again once they are forgotten: it has room again.
func TestPreFilterForgetsWhatAPodGroupCycleSaw(t *testing.T) {
	pl, snapshot, infos := nineNodes(t, 2)
	incoming := withPriority(pod("x", "", "production", "8"), 10000)
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00", "n01"}; !slices.Equal(got, want) {
		t.Fatalf("PreFilter named %v, want %v", got, want)
	}
	// n01 changes, unread (a CPU pod bound there: room still); then a
	// group member is assumed on it, the group's next member is filtered
	// (the first read of n01 since it changed), and the group fails: the
	// member is forgotten.
	for _, ni := range infos {
		if ni.Node().Name == "n01" {
			ni.(*framework.NodeInfo).AddPod(st.MakePod().Name("cpu").Namespace("ns").UID("cpu").Node("n01").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj())
		}
	}
	member := withPriority(pod("member", "n01", "production", "8"), 10000)
	memberInfo, err := framework.NewPodInfo(member)
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.AssumePod(memberInfo); err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	state.SetPodGroupSchedulingCycle(groupCycle{})
	result, s := pl.PreFilter(context.Background(), state, incoming, infos)
	if !s.IsSuccess() || result.AllNodes() {
		t.Fatalf("PreFilter in the group's cycle = %v, %v; want n00 named", result, s)
	}
	if got, want := sets.List(result.NodeNames), []string{"n00"}; !slices.Equal(got, want) {
		t.Fatalf("PreFilter in the group's cycle named %v, want %v", got, want)
	}
	if err := snapshot.ForgetPod(klogDiscard(), member); err != nil {
		t.Fatal(err)
	}
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n00", "n01"}; !slices.Equal(got, want) {
		t.Errorf("after the group's member was forgotten, PreFilter named %v, want %v", got, want)
	}
}

// TestNarrowedPodsAreRetriedWhenGPUsFree: a pod PreFilter narrowed and
// that fit none of the nodes named has InferencePacking among the plugins
// that rejected it, so InferencePacking must ask the queue to retry it
// when GPUs may have freed or come, as NodeResourcesFit would.
func TestNarrowedPodsAreRetriedWhenGPUsFree(t *testing.T) {
	pl, _ := newPlugin(t, []*v1.Node{node("n0", "leaf-a")}, nil)
	events, err := pl.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hints := map[fwk.EventResource]fwk.ClusterEventWithHint{}
	for _, e := range events {
		hints[e.Event.Resource] = e
	}
	podEvent, nodeEvent := hints[fwk.AssignedPod], hints[fwk.Node]
	if podEvent.Event.ActionType&fwk.Delete == 0 || podEvent.Event.ActionType&fwk.UpdatePodScaleDown == 0 ||
		nodeEvent.Event.ActionType&fwk.Add == 0 || nodeEvent.Event.ActionType&fwk.UpdateNodeAllocatable == 0 {
		t.Fatalf("EventsToRegister = %+v; want assigned pods deleted or scaled down and nodes added or their allocatable changed", events)
	}
	gpuPod, cpuPod := pod("x", "", "production", "8"), st.MakePod().Name("c").Namespace("ns").Obj()
	cpuNode := st.MakeNode().Name("c").Capacity(map[v1.ResourceName]string{"cpu": "8"}).Obj()
	for _, tc := range []struct {
		name        string
		fn          fwk.QueueingHintFn
		pod         *v1.Pod
		oldObj, obj any
		want        fwk.QueueingHint
	}{
		{"a GPU pod deleted, a GPU pod waiting", podEvent.QueueingHintFn, gpuPod, pod("gone", "n0", "production", "2"), nil, fwk.Queue},
		{"a CPU pod deleted", podEvent.QueueingHintFn, gpuPod, cpuPod, nil, fwk.QueueSkip},
		{"a GPU pod deleted, a CPU pod waiting", podEvent.QueueingHintFn, cpuPod, pod("gone", "n0", "production", "2"), nil, fwk.QueueSkip},
		{"a GPU node added", nodeEvent.QueueingHintFn, gpuPod, nil, node("n1", "leaf-a"), fwk.Queue},
		{"a CPU node added", nodeEvent.QueueingHintFn, gpuPod, nil, cpuNode, fwk.QueueSkip},
	} {
		got, err := tc.fn(klogDiscard(), tc.pod, tc.oldObj, tc.obj)
		if err != nil || got != tc.want {
			t.Errorf("%s: hint = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestPreFilterEstimateCatchesUpWithinARescan: the counts that decide
// whether to narrow follow nodes filled without a hint (a research gang
// the other profile placed) within fullRescan, even when no pod reaches
// PreScore meanwhile.
func TestPreFilterEstimateCatchesUpWithinARescan(t *testing.T) {
	pl, _, infos := nineNodes(t, 9)
	incoming := withPriority(pod("x", "", "production", "8"), 10000)
	if got := preFilterNames(t, pl, incoming, infos); got != nil {
		t.Fatalf("every node has room: PreFilter named %v, want every node", got)
	}
	for _, ni := range infos {
		if name := ni.Node().Name; name != "n04" {
			ni.(*framework.NodeInfo).AddPod(withPriority(pod("train-"+name, name, "research", "8"), 20000))
		}
	}
	clock := pl.clock.(*testingclock.FakePassiveClock)
	clock.SetTime(clock.Now().Add(fullRescan))
	if got, want := preFilterNames(t, pl, incoming, infos), []string{"n04"}; !slices.Equal(got, want) {
		t.Errorf("a rescan after the gang filled 8 of 9 nodes: PreFilter named %v, want %v", got, want)
	}
}
