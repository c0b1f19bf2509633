// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

// bindPods is how many pods each variant of BenchmarkPlaceholderBind binds.
const bindPods = 100

// BenchmarkPlaceholderBind measures what a placeholder job adds to a pod's
// bind on a shared node of the real Slurm (22.05 through sbatch, 24.11
// through slurmrestd): 100 one-GPU pods, one at a
// time (each deleted once bound, which cancels its job), from the create
// call to the pod seen bound, with placeholders off and on in the same run
// (the same scheduler, nodes and Slurm). Reported: p50 and p99 of each, and
// on/off. Run (hack/slurm-up.sh first):
//
//	go test -run '^$' -bench PlaceholderBind -benchtime 1x -count 3 ./test/integration/slurm/
func BenchmarkPlaceholderBind(b *testing.B) {
	for _, s := range slurms {
		b.Run(s.name, func(b *testing.B) { benchmarkPlaceholderBind(b, s.live(b)) })
	}
}

func benchmarkPlaceholderBind(b *testing.B, env slurmEnv) {
	b.Cleanup(func() { env.resumeAll(b) })
	cp := harness.Shared(b)
	slurmNodes(b, cp, map[string]string{"sluice.dev/slurm-shared": "true"})
	for b.Loop() {
		p50 := map[bool]float64{}
		for _, on := range []bool{false, true} {
			args := env.writes(b, env.slurmArgs(env.url, env.tokenFile))
			args.Placeholders = &configv1.SlurmPlaceholderConfig{Enabled: ptr.To(on), TimeoutSeconds: ptr.To[int64](30), ResyncSeconds: ptr.To[int64](1)}
			lat := bindLatencies(b, cp, args)
			name := map[bool]string{false: "off", true: "placeholders"}[on]
			p50[on] = quantile(lat, 0.5)
			b.ReportMetric(p50[on], name+"-p50-ms")
			b.ReportMetric(quantile(lat, 0.99), name+"-p99-ms")
		}
		b.ReportMetric(p50[true]-p50[false], "added-p50-ms")
	}
}

// bindLatencies runs a scheduler with args and binds bindPods pods, one at
// a time, returning each one's create-to-bound time in ms.
func bindLatencies(b *testing.B, cp *harness.ControlPlane, args *configv1.SlurmConfig) []float64 {
	cfg := harness.LoadShippedConfig(b)
	harness.SetPluginArgs(b, cfg, "sluice-research", "SlurmNodeState", &configv1.SlurmNodeStateArgs{Slurm: args})
	sched := harness.StartScheduler(b, cp, cfg)
	defer sched.Stop()
	ns := harness.NewNamespace(b, cp.Client)
	var mu sync.Mutex
	boundAt := map[string]time.Time{}
	harness.WatchPods(b, cp.Client, ns, func(e harness.PodEvent) {
		if e.New != nil && e.New.Spec.NodeName != "" {
			mu.Lock()
			if _, ok := boundAt[e.New.Name]; !ok {
				boundAt[e.New.Name] = time.Now()
			}
			mu.Unlock()
		}
	})
	var out []float64
	for i := range bindPods {
		name := fmt.Sprintf("p%03d", i)
		pod := harness.Pod(ns, name).GPUs(1).Obj()
		start := time.Now()
		harness.CreatePods(b, cp.Client, pod)
		harness.WaitForPodsBound(b, cp.Client, ns, name)
		harness.Eventually(b, time.Minute, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			_, ok := boundAt[name]
			return ok, nil
		}, func() string { return "the watch did not see " + name + " bound" })
		mu.Lock()
		out = append(out, float64(boundAt[name].Sub(start).Microseconds())/1000)
		mu.Unlock()
		harness.DeletePods(b, cp.Client, ns, name)
	}
	return out
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
