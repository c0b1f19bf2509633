// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Arrival is one pod of an FGD-style arrival sequence.
type Arrival struct {
	Pod PodSpec
	// RequestedGPUs is what the pod asks for in GPU fractions (the FGD
	// way: a pod sharing half a GPU requests 0.5); Pod.GPUs is the whole
	// GPUs Kubernetes gives it.
	RequestedGPUs float64
}

// FGDPoint is the state after the arrivals up to a level.
type FGDPoint struct {
	// Arrival is requested GPUs so far as a share of capacity (1.0 = 100%).
	Arrival float64
	// UnallocatedPct is 100 - allocated/capacity*100.
	UnallocatedPct float64
	AllocatedGPUs  int
	Unschedulable  int
}

// FGDResult is one policy's run of the FGD method.
type FGDResult struct {
	Policy   string
	Capacity int
	Points   []FGDPoint
	Pods     int
	Duration time.Duration
}

// RunFGD replays arrivals one by one (each pod is decided before the next
// arrives; pods never leave), as in "Beware of Fragmentation" (USENIX ATC
// 2023), and reads the unallocated GPU share whenever the arrival level
// crosses one of levels.
func RunFGD(ctx context.Context, env *Env, nodes []NodeSpec, arrivals []Arrival, levels []float64, progress func(done, total int)) (FGDResult, error) {
	start := time.Now()
	capacity := 0
	for _, n := range nodes {
		capacity += n.GPUs
	}
	if err := createSpecs(ctx, env, nodes); err != nil {
		return FGDResult{}, err
	}
	res := FGDResult{Policy: env.Policy.Name, Capacity: capacity, Pods: len(arrivals)}
	requested, allocated, unschedulable, next := 0.0, 0, 0, 0
	for i, a := range arrivals {
		decided, err := env.CreateAndWait(ctx, []*v1.Pod{a.Pod.Pod(env.Policy)}, time.Minute)
		if err != nil {
			return res, fmt.Errorf("arrival %d (%s): %w", i, a.Pod.Name, err)
		}
		if decided[a.Pod.Name].Node != "" {
			allocated += a.Pod.GPUs
		} else {
			unschedulable++
		}
		requested += a.RequestedGPUs
		for next < len(levels) && requested >= levels[next]*float64(capacity) {
			res.Points = append(res.Points, FGDPoint{
				Arrival: levels[next], AllocatedGPUs: allocated, Unschedulable: unschedulable,
				UnallocatedPct: 100 - 100*float64(allocated)/float64(capacity),
			})
			next++
		}
		if progress != nil {
			progress(i+1, len(arrivals))
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// createSpecs creates the nodes of specs.
func createSpecs(ctx context.Context, env *Env, specs []NodeSpec) error {
	nodes := make([]*v1.Node, len(specs))
	for i, s := range specs {
		nodes[i] = s.Node()
	}
	return env.CreateNodes(ctx, nodes)
}
