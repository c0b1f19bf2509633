// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// PackingResult is one policy's placement of inference pods.
type PackingResult struct {
	Policy string
	Pods   int
	Placed int
	// FreeNodes and FreeLeaves are the nodes and leaf switches left with
	// no GPU in use: what training gangs can have whole.
	FreeNodes, FreeLeaves int
	Nodes, Leaves         int
	UnallocatedPct        float64
	Duration              time.Duration
}

// RunPacking places inference pods one by one (pods never leave) and
// counts what stays whole for training.
func RunPacking(ctx context.Context, env *Env, nodes []NodeSpec, pods []PodSpec, progress func(done, total int)) (PackingResult, error) {
	start := time.Now()
	if err := createSpecs(ctx, env, nodes); err != nil {
		return PackingResult{}, err
	}
	res := PackingResult{Policy: env.Policy.Name, Pods: len(pods), Nodes: len(nodes)}
	used := map[string]int{}
	capacity := 0
	for _, n := range nodes {
		capacity += n.GPUs
	}
	allocated := 0
	for i, p := range pods {
		decided, err := env.CreateAndWait(ctx, []*v1.Pod{p.Pod(env.Policy)}, time.Minute)
		if err != nil {
			return res, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if node := decided[p.Name].Node; node != "" {
			res.Placed++
			used[node] += p.GPUs
			allocated += p.GPUs
		}
		if progress != nil {
			progress(i+1, len(pods))
		}
	}
	leafBusy := map[string]bool{}
	leaves := map[string]bool{}
	for _, n := range nodes {
		leaf := n.Leaf
		if leaf == "" {
			leaf = "~" + n.Name
		}
		leaves[leaf] = true
		if used[n.Name] > 0 {
			leafBusy[leaf] = true
		} else {
			res.FreeNodes++
		}
	}
	res.Leaves = len(leaves)
	res.FreeLeaves = len(leaves) - len(leafBusy)
	res.UnallocatedPct = 100 - 100*float64(allocated)/float64(capacity)
	res.Duration = time.Since(start)
	return res, nil
}
