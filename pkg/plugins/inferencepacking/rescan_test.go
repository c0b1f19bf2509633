// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package inferencepacking

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"
)

// countingInfo counts the reads of a NodeInfo's generation, the first
// thing PreScore reads of a node it looks at.
type countingInfo struct {
	fwk.NodeInfo
	reads *int
}

func (c countingInfo) GetGeneration() int64 {
	*c.reads++
	return c.NodeInfo.GetGeneration()
}

// TestPreScoreLooksOnlyAtHintedNodes: once PreScore has seen the nodes, a
// cycle after which nothing changed reads no node (at 5,000 nodes a pass
// over every NodeInfo cost each cycle 0.15 ms, 1.6 s of CPU in a
// SchedulingBasic run); a cycle after this profile reserved production on
// a node reads that node alone and scores it as running production.
func TestPreScoreLooksOnlyAtHintedNodes(t *testing.T) {
	nodes, running := halfServing(200, 8)
	pl, snapshot := newPlugin(t, nodes, running)
	list, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	infos := make([]fwk.NodeInfo, len(list))
	for i, ni := range list {
		infos[i] = countingInfo{NodeInfo: ni, reads: &reads}
	}
	ctx := context.Background()
	incoming := pod("serve-x", "", "production", "1")
	preScore := func() *framework.CycleState {
		t.Helper()
		state := framework.NewCycleState()
		if s := pl.PreScore(ctx, state, incoming, infos); !s.IsSuccess() {
			t.Fatal(s)
		}
		return state
	}
	pl.handle = listHandle{handle: pl.handle.(handle), infos: infos}
	preScore()
	reads = 0
	preScore()
	if reads != 0 {
		t.Errorf("a cycle after which nothing changed read %d of %d nodes, want none", reads, len(infos))
	}
	checkHinted(t, pl, infos, &reads, preScore)
}

// listHandle serves infos as the snapshot's node list.
type listHandle struct {
	handle
	infos []fwk.NodeInfo
}

func (h listHandle) SnapshotSharedLister() fwk.SharedLister {
	return listLister{h.handle.snapshot, h.infos}
}

type listLister struct {
	fwk.SharedLister
	infos []fwk.NodeInfo
}

func (l listLister) NodeInfos() fwk.NodeInfoLister {
	return infoList{l.SharedLister.NodeInfos(), l.infos}
}

type infoList struct {
	fwk.NodeInfoLister
	infos []fwk.NodeInfo
}

func (l infoList) List() ([]fwk.NodeInfo, error) { return l.infos, nil }

// checkHinted: production reserved on a node is seen at the next cycle,
// which reads that node alone; a change nothing hinted (production gone
// from a node, as when a pod is deleted) is seen once fullRescan has
// passed, by a cycle that reads every node.
func checkHinted(t *testing.T, pl *InferencePacking, infos []fwk.NodeInfo, reads *int, preScore func() *framework.CycleState) {
	t.Helper()
	ctx := context.Background()
	incoming := pod("serve-x", "", "production", "1")
	score := func(state *framework.CycleState, ni fwk.NodeInfo) int64 {
		t.Helper()
		s, status := pl.Score(ctx, state, incoming, ni)
		if !status.IsSuccess() {
			t.Fatal(status)
		}
		return s
	}
	// n0001 runs nothing; its leaf (n0000-n0007) runs production.
	var n000, n001 fwk.NodeInfo
	for _, ni := range infos {
		switch ni.Node().Name {
		case "n0000":
			n000 = ni
		case "n0001":
			n001 = ni
		}
	}
	serve := pod("serve-n0001", "n0001", "production", "2")
	n001.(countingInfo).NodeInfo.(*framework.NodeInfo).AddPod(serve)
	if s := pl.Reserve(ctx, framework.NewCycleState(), serve, "n0001"); !s.IsSuccess() {
		t.Fatal(s)
	}
	*reads = 0
	state := preScore()
	if *reads != 1 {
		t.Errorf("a cycle after production was reserved on one node read %d nodes, want 1", *reads)
	}
	if got, want := score(state, n001), int64(40+30+20+10*3/8); got != want {
		t.Errorf("n0001 with production reserved scores %d, want %d", got, want)
	}

	// n0000's production leaves without a hint.
	if err := n000.(countingInfo).NodeInfo.(*framework.NodeInfo).RemovePod(klogDiscard(), running(n000)[0]); err != nil {
		t.Fatal(err)
	}
	*reads = 0
	state = preScore()
	if got, want := score(state, n000), int64(40+30+20+10*1/8); *reads != 0 || got != want {
		t.Errorf("before fullRescan passed: read %d nodes and n0000 scores %d, want 0 and %d (not yet seen)", *reads, got, want)
	}
	pl.clock.(*testingclock.FakePassiveClock).SetTime(pl.clock.Now().Add(fullRescan))
	*reads = 0
	state = preScore()
	if got, want := score(state, n000), int64(40+20+10*1/8); *reads != len(infos) || got != want {
		t.Errorf("once fullRescan passed: read %d nodes and n0000 scores %d, want %d and %d", *reads, got, len(infos), want)
	}
}

// running is the pods on a node.
func running(ni fwk.NodeInfo) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range ni.GetPods() {
		out = append(out, p.GetPod())
	}
	return out
}

func klogDiscard() klog.Logger { return klog.Background().V(10) }
