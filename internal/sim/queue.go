// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// queueSizes are the GPUs of a high-occupancy workload's gangs, with their
// weights (in 100): half single GPUs, as the median job of every Acme
// cluster (../shared/data/traces/acme_cluster_summary.csv: med_gpu_num 1),
// and a tail to 256 GPUs, for a mean of about 21 GPUs (Kalos: 26.77,
// Helios: 3.7).
func queueSizes() []struct{ gpus, weight int } {
	return []struct{ gpus, weight int }{
		{1, 45}, {2, 8}, {4, 8}, {8, 10}, {16, 8}, {32, 8}, {64, 6}, {128, 5}, {256, 2},
	}
}

// QueueJobs is a high-occupancy gang workload: n gangs whose arrival gaps
// and run times are exponential with means gap and run (seeded), sized by
// queueSizes. Up to 8 GPUs a gang is one pod with all of them (a
// single-pod gang); above, 8-GPU pods. key names, for a gang's GPUs, the
// node label of the lowest fabric level that can hold it (the constraint
// a user of upstream's TopologyPlacement would write).
func QueueJobs(n int, seed uint64, gap, run time.Duration, key func(gpus int) string) []GangJob {
	rng := rand.New(rand.NewPCG(seed, 0x51ce))
	sizes := queueSizes()
	total := 0
	for _, s := range sizes {
		total += s.weight
	}
	jobs := make([]GangJob, n)
	at := time.Duration(0)
	for i := range jobs {
		at += time.Duration(rng.ExpFloat64() * float64(gap))
		pick, gpus := rng.IntN(total), 0
		for _, s := range sizes {
			if pick < s.weight {
				gpus = s.gpus
				break
			}
			pick -= s.weight
		}
		j := GangJob{Name: fmt.Sprintf("q%03d-%dgpu", i, gpus), Submit: at,
			Duration: max(time.Minute, time.Duration(rng.ExpFloat64()*float64(run))).Round(time.Second)}
		if gpus <= 8 {
			j.Pods, j.GPUsPerPod = 1, gpus
		} else {
			j.Pods, j.GPUsPerPod = gpus/8, 8
		}
		if key != nil {
			j.TopologyKey = key(gpus)
		}
		jobs[i] = j
	}
	return jobs
}
