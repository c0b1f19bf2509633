// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestBoundsAgainstBruteForce: the lower bounds the simulator judges gangs
// by (pkg/fabric's, through boundsFor) equal the fewest leaves and nodes
// found by trying every set of nodes, on 500 random small clusters (up to
// 12 nodes, some GPUs taken) and gangs (0 when the gang fits nowhere).
func TestBoundsAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 500 {
		var nodes []NodeSpec
		free := map[string]int{}
		for s := range 1 + rng.IntN(2) {
			for l := range 1 + rng.IntN(3) {
				for n := range 1 + rng.IntN(2) {
					name := fmt.Sprintf("s%d-l%d-n%d", s, l, n)
					nodes = append(nodes, NodeSpec{Name: name, Leaf: fmt.Sprintf("s%d-l%d", s, l), Spine: fmt.Sprintf("s%d", s), Block: "b", GPUs: 8})
					free[name] = 8 - rng.IntN(9)
				}
			}
		}
		job := GangJob{Name: "g", Pods: 1 + rng.IntN(8), GPUsPerPod: []int{1, 2, 4, 8}[rng.IntN(4)]}
		tree, _, err := treeOf(nodes)
		if err != nil {
			t.Fatal(err)
		}
		leaves, nodesLB := boundsFor(tree, free, job)
		wantLeaves, wantNodes := bruteBounds(nodes, free, job)
		if leaves != wantLeaves || nodesLB != wantNodes {
			t.Fatalf("cluster %d, %d pods of %d GPUs, free %v: bounds %d leaves, %d nodes; brute force %d, %d",
				c, job.Pods, job.GPUsPerPod, free, leaves, nodesLB, wantLeaves, wantNodes)
		}
	}
}

// bruteBounds tries every set of nodes that holds the job and keeps the
// fewest nodes and the fewest distinct leaves (0, 0 when none does).
func bruteBounds(nodes []NodeSpec, free map[string]int, job GangJob) (leaves, nodeCount int) {
	for set := uint(1); set < 1<<len(nodes); set++ {
		holds, used := 0, map[string]bool{}
		for i, n := range nodes {
			if set&(1<<i) != 0 {
				holds += free[n.Name] / job.GPUsPerPod
				used[n.Leaf] = true
			}
		}
		if holds < job.Pods {
			continue
		}
		if k := bits.OnesCount(set); nodeCount == 0 || k < nodeCount {
			nodeCount = k
		}
		if leaves == 0 || len(used) < leaves {
			leaves = len(used)
		}
	}
	return leaves, nodeCount
}
