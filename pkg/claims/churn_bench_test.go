// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkChurn is the claim engine under a busy cluster: 50,000
// production pods (2,500 ReplicaSets of 20, no PodDisruptionBudgets), 4
// live claims of 1,000 victims each, and 100 pod updates a second, each to
// a pod drawn at random. Per simulated second the engine syncs every claim
// once (its resync) and, after each update, the claims that read the pod
// (as its event handler queues them). Replacements never come, so every
// claim stays live with most victims waiting on their budgets: the state
// in which the engine does the most. It reports the engine's CPU-seconds
// per simulated second (user and system time of the process, garbage
// collection included) and its p99 sync time.
//
//	go test ./pkg/claims -run '^$' -bench Churn -benchtime 1x
func BenchmarkChurn(b *testing.B) {
	const (
		replicaSets   = 2500
		perSet        = 20
		claimsN       = 4
		victimsPer    = 1000
		updatesPerSec = 100
		seconds       = 30
	)
	for range b.N {
		b.StopTimer()
		r := newRig(b)
		var pods []*v1.Pod
		for i := range replicaSets {
			pods = append(pods, r.rs(fmt.Sprintf("serve-%04d", i), perSet, fmt.Sprintf("n%d", i%2), 1)...)
		}
		// Each claim takes 1,000 victims, 10 of each of 100 ReplicaSets.
		var keys []string
		for c := range claimsN {
			var victims []*v1.Pod
			for s := range victimsPer / 10 {
				set := c*(victimsPer/10) + s
				victims = append(victims, pods[set*perSet:set*perSet+10]...)
			}
			keys = append(keys, r.claim(r.claimant(fmt.Sprintf("train-%d", c)), victims))
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var syncs []time.Duration
		sync := func(key string, at time.Duration) {
			r.clock.SetTime(t0.Add(at))
			start := time.Now()
			if err := r.engine.Sync(r.ctx, key); err != nil {
				b.Fatal(err)
			}
			syncs = append(syncs, time.Since(start))
		}
		cpu0 := cpuTime(b)
		b.StartTimer()
		for sec := range seconds {
			at := time.Duration(sec) * time.Second
			for u := range updatesPerSec {
				p := pods[rng.IntN(len(pods))].DeepCopy()
				p.UID = types.UID(string(p.UID)) // same pod, new object
				p.Annotations = map[string]string{"update": fmt.Sprint(sec*updatesPerSec + u)}
				r.put(p)
				for _, key := range r.store.Watching(watchKeys(p)...) {
					sync(key, at)
				}
			}
			for _, key := range keys {
				sync(key, at)
			}
		}
		b.StopTimer()
		cpu := cpuTime(b) - cpu0
		slices.Sort(syncs)
		b.ReportMetric(cpu.Seconds()/seconds, "cpu-s/s")
		b.ReportMetric(float64(syncs[len(syncs)*99/100].Microseconds())/1000, "p99-sync-ms")
		b.ReportMetric(float64(len(syncs))/seconds, "syncs/s")
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
