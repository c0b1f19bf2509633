// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"math"
	"math/rand/v2"
)

// FGDSample builds an arrival sequence the way the FGD paper (Weng et al.,
// "Beware of Fragmentation", USENIX ATC 2023) loads a cluster: pods are drawn
// uniformly at random, with replacement, from the GPU pods of the trace and
// arrive one after another until the GPUs they request, counted as
// RequestedGPUMilli (num_gpu x gpu_milli / 1000), reach arrival x
// capacityGPUs. The pod that crosses that level is the last one. Pods never
// leave; a caller reads its metric (e.g. unallocated GPU %) at each arrival
// level it cares about on the way.
//
// Only pods that request GPUs are sampled: CPU-only pods add nothing to the
// GPU load that ends the sequence. The returned pods are copies in arrival
// order; since the draw is with replacement the same trace pod, with the
// same Name, can arrive several times, so a caller that creates Kubernetes
// pods must name them, e.g. by arrival index.
//
// The draw is deterministic: a math/rand/v2 PCG seeded with (seed, 0). The
// result is nil when there is nothing to sample or nothing to fill
// (capacityGPUs <= 0, arrival not a positive finite number).
//
// With the default trace, a 6,212-GPU cluster and arrival 1.3 the sequence
// ends once the pods ask for 8,075.6 GPUs.
func FGDSample(pods []OpenbPod, capacityGPUs int, arrival float64, seed uint64) []OpenbPod {
	if capacityGPUs <= 0 || !(arrival > 0) || math.IsInf(arrival, 1) {
		return nil
	}
	var gpuPods []OpenbPod
	for _, p := range pods {
		if p.RequestedGPUMilli() > 0 {
			gpuPods = append(gpuPods, p)
		}
	}
	if len(gpuPods) == 0 {
		return nil
	}
	targetMilli := arrival * float64(capacityGPUs) * 1000
	rng := rand.New(rand.NewPCG(seed, 0))
	var arrived []OpenbPod
	var requestedMilli int64
	for float64(requestedMilli) < targetMilli {
		p := gpuPods[rng.IntN(len(gpuPods))]
		arrived = append(arrived, p)
		requestedMilli += p.RequestedGPUMilli()
	}
	return arrived
}
