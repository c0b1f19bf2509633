// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabric

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchTree is a 3-tier fabric of about `nodes` nodes: 32 nodes a leaf,
// 8 leaves a spine, 4 spines a block.
func benchTree(b *testing.B, nodes int) *Tree {
	b.Helper()
	var ns []Node
	for i := 0; i < nodes; i++ {
		leaf, spine, block := i/32, i/(32*8), i/(32*8*4)
		ns = append(ns, Node{
			Name:     fmt.Sprintf("n%05d", i),
			Switches: []string{fmt.Sprintf("l%d", leaf), fmt.Sprintf("s%d", spine), fmt.Sprintf("b%d", block)},
		})
	}
	t, err := Build([]string{"leaf", "spine", "block"}, ns)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkBuild measures building the tree, which happens once per change
// of the node set or labels.
func BenchmarkBuild(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var ns []Node
			for i := 0; i < nodes; i++ {
				ns = append(ns, Node{Name: fmt.Sprintf("n%05d", i),
					Switches: []string{fmt.Sprintf("l%d", i/32), fmt.Sprintf("s%d", i/256), fmt.Sprintf("b%d", i/1024)}})
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Build([]string{"leaf", "spine", "block"}, ns); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlaceGang measures one gang's placement decision (overlay plus
// search) on a half-full, fragmented cluster: what FabricTopology does per
// gang (native path) or per member (label path).
func BenchmarkPlaceGang(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		tree := benchTree(b, nodes)
		rng := rand.New(rand.NewPCG(1, 2))
		slots := make([]int, tree.NumNodes())
		for i := range slots {
			slots[i] = rng.IntN(9) // 0..8 free GPUs
		}
		for _, gang := range []struct{ pods, gpus int }{{4, 8}, {32, 8}, {64, 1}} {
			b.Run(fmt.Sprintf("nodes=%d/gang=%dx%dGPU", nodes, gang.pods, gang.gpus), func(b *testing.B) {
				perPod := make([]int, len(slots))
				for b.Loop() {
					for i, s := range slots {
						perPod[i] = s / gang.gpus
					}
					o := tree.Overlay(perPod)
					if _, ok := o.Place(Request{Pods: gang.pods, MaxLevel: tree.RootLevel()}); !ok {
						b.Fatal("no placement")
					}
					o.Candidates(Request{Pods: gang.pods, MaxLevel: tree.RootLevel()}, 2)
				}
			})
		}
	}
}
