// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/benchfmt"
	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/internal/nodesim"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/registry"
)

func BenchmarkPerfScheduling(b *testing.B) {
	var mu sync.Mutex
	var usage []benchfmt.Usage
	var placements []benchfmt.Placement
	var avail []benchfmt.Availability
	var recording sync.WaitGroup
	dir := dataDir()
	workloads, err := writeWorkloads("performance-config.yaml", generatedWorkloads, scale, reps)
	if err != nil {
		b.Fatal(err)
	}
	// The registry scheduler_perf hands every scheduler it starts: filled
	// with sluice's plugins before a workload of the sluice configuration,
	// empty before the others, so the stock and ceiling schedulers have no
	// out-of-tree plugin registered at all. scheduler.New copies it.
	sluice := registry.PerScheduler()
	outOfTree := frameworkruntime.Registry{}
	progress := newProgress(os.Stderr, perf.PerfSchedulingLabelFilter)
	perf.RunBenchmarkPerfScheduling(b, generatedWorkloads, "sluice", outOfTree,
		perf.WithPodsSchedulingTimeout(20*time.Minute),
		perf.WithPrepareFn(func(tCtx ktesting.TContext) error {
			if err := startClusterParts(tCtx); err != nil {
				return err
			}
			name := strings.TrimPrefix(tCtx.Name(), b.Name()+"/")
			if err := startClaimCase(tCtx, workloads[name], func(a benchfmt.Availability) {
				mu.Lock()
				defer mu.Unlock()
				avail = append(avail, a)
			}); err != nil {
				return err
			}
			if !strings.Contains(tCtx.Name(), placementCase) {
				return nil
			}
			recording.Add(1)
			return recordPlacement(tCtx, func(p benchfmt.Placement) {
				defer recording.Done()
				mu.Lock()
				defer mu.Unlock()
				placements = append(placements, p)
			})
		}),
		perf.WithNodeUpdateFn(func(tCtx ktesting.TContext, _ *scheduler.Scheduler, _ *perf.Workload, _ *v1.NodeList) error {
			if err := waitProductionReady(tCtx); err != nil {
				return err
			}
			return nodesReady(tCtx)
		}),
		perf.WithPreRunFn(func(tCtx ktesting.TContext, w *perf.Workload) (func(), error) {
			name := strings.TrimPrefix(tCtx.Name(), b.Name()+"/")
			clear(outOfTree)
			if cfg := caseConfig(name); cfg == configSluice || cfg == configBBM {
				maps.Copy(outOfTree, sluice)
			}
			done := progress.start(name)
			resetPeakRSS()
			cpu0, start := cpuSeconds(), time.Now()
			return func() {
				u := benchfmt.Usage{Workload: tCtx.Name(), CPUSeconds: cpuSeconds() - cpu0, Seconds: time.Since(start).Seconds(), MaxRSSMiB: peakRSSMiB()}
				u.Pods = workloads[name].Pods
				done(tCtx.Failed())
				mu.Lock()
				defer mu.Unlock()
				usage = append(usage, u)
			}, nil
		}))
	data, err := json.MarshalIndent(usage, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, benchfmt.UsageFile), data, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := writeRunInfo(filepath.Join(dir, benchfmt.RunFile)); err != nil {
		b.Fatal(err)
	}
	recording.Wait()
	if data, err = json.MarshalIndent(placements, "", "  "); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, benchfmt.PlacementFile), data, 0o644); err != nil {
		b.Fatal(err)
	}
	if data, err = json.MarshalIndent(avail, "", "  "); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, benchfmt.AvailabilityFile), data, 0o644); err != nil {
		b.Fatal(err)
	}
	// The report lists these plugins' latencies apart.
	data, err = json.Marshal(slices.Sorted(maps.Keys(sluice)))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, benchfmt.PluginsFile), data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// builtFrom is the commit this binary was built from (`make bench` sets it
// with -ldflags -X, "-dirty" when the tree had changes then): the run is
// that code's, whatever the tree holds when it ends.
var builtFrom string

func writeRunInfo(file string) error {
	info := benchfmt.RunInfo{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Go: runtime.Version(), Args: os.Args[1:]}
	// Else the tree's now: "unknown" outside a git checkout; "-dirty" when
	// the tree has changes.
	info.Commit = builtFrom
	if info.Commit == "" {
		info.Commit = "unknown"
		if out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output(); err == nil {
			info.Commit = strings.TrimSpace(string(out))
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		info.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					info.MemoryGiB = math.Round(kb/1024/1024*10) / 10
				}
			}
		}
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// caseConfig is the configuration of a generated case, from its name
// "<case>.r<repetition>.<configuration>/<workload>".
func caseConfig(name string) string {
	testCase, _, _ := strings.Cut(name, "/")
	return testCase[strings.LastIndex(testCase, ".")+1:]
}

// progress tells, on stderr, which workload runs and how far the run is:
// `make bench` keeps scheduler_perf's output in its log and shows these.
type progress struct {
	w       io.Writer
	total   int
	n       int
	started time.Time
}

// newProgress counts the workloads a run with the label filter runs: those
// carrying every label the filter asks for (scheduler_perf's filter also
// knows exclusions; a workload excluded that way is still counted) whose
// case and name match -test.bench's second and third parts.
func newProgress(w io.Writer, filter string) *progress {
	p := &progress{w: w, started: time.Now()}
	data, err := os.ReadFile(generatedWorkloads)
	if err != nil {
		return p
	}
	var cases []struct {
		Name      string
		Labels    []string
		Workloads []struct {
			Name   string
			Labels []string
		}
	}
	if yaml.Unmarshal(data, &cases) != nil {
		return p
	}
	var level []*regexp.Regexp // -test.bench, split as the testing package does
	if f := flag.Lookup("test.bench"); f != nil {
		for _, part := range strings.Split(f.Value.String(), "/")[1:] {
			re, err := regexp.Compile(part)
			if err != nil {
				return p
			}
			level = append(level, re)
		}
	}
	matches := func(i int, name string) bool { return i >= len(level) || level[i].MatchString(name) }
	for _, c := range cases {
		if !matches(0, c.Name) {
			continue
		}
		for _, w := range c.Workloads {
			if !matches(1, w.Name) {
				continue
			}
			labels := append(slices.Clone(c.Labels), w.Labels...)
			ok := true
			for _, want := range strings.Split(filter, ",") {
				if want = strings.TrimPrefix(want, "+"); want != "" && !strings.HasPrefix(want, "-") && !slices.Contains(labels, want) {
					ok = false
				}
			}
			if ok {
				p.total++
			}
		}
	}
	return p
}

// start reports a workload starting and returns what reports it done.
func (p *progress) start(name string) func(failed bool) {
	p.n++
	begin := time.Now()
	fmt.Fprintf(p.w, "bench: [%d/%d] %s: started, %s into the run\n", p.n, p.total, name, time.Since(p.started).Round(time.Second))
	return func(failed bool) {
		result := "done"
		if failed {
			result = "FAILED"
		}
		fmt.Fprintf(p.w, "bench: [%d/%d] %s: %s in %s\n", p.n, p.total, name, result, time.Since(begin).Round(time.Second))
	}
}

// clusterPartsCase is the case that runs what a claim needs beyond
// scheduler_perf's apiserver and scheduler: controllers that replace an
// evicted pod and a node simulator that makes the replacement Ready.
const clusterPartsCase = "/ResearchClaim."

// startClusterParts starts, for clusterPartsCase only, the ReplicaSet,
// Deployment, StatefulSet and disruption controllers and the node
// simulator of the physical nodes; they stop with the workload.
func startClusterParts(tCtx ktesting.TContext) error {
	if !strings.Contains(tCtx.Name(), clusterPartsCase) {
		return nil
	}
	if _, err := kcm.Start(tCtx, tCtx.RESTConfig(), kcm.Set{Workloads: true}); err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	// The overflow node is served by the real one (claim_test.go).
	skip := labels.SelectorFromSet(labels.Set{overflownode.LabelType: overflownode.TypeValue})
	if _, err := nodesim.Start(tCtx, tCtx.Client(), nodesim.Options{Skip: skip}); err != nil {
		return fmt.Errorf("node simulator: %w", err)
	}
	return nil
}

// waitProductionReady returns once every Deployment has all its replicas
// Ready (at once where there are none): the production a claim moves is
// in place before the next operation.
func waitProductionReady(tCtx ktesting.TContext) error {
	var last string
	err := wait.PollUntilContextTimeout(tCtx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := tCtx.Client().AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		want, ready := int32(0), int32(0)
		for _, d := range list.Items {
			want += ptr.Deref(d.Spec.Replicas, 1)
			ready += d.Status.ReadyReplicas
		}
		last = fmt.Sprintf("%d of %d production replicas Ready", ready, want)
		return ready == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for production: %s: %w", last, err)
	}
	return nil
}

// dataDir is where scheduler_perf writes its JSON (-data-items-dir, else
// the working directory).
func dataDir() string {
	if d := os.Getenv("SLUICE_BENCH_DIR"); d != "" {
		return d
	}
	return "."
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// resetPeakRSS returns the Go heap of earlier workloads to the kernel and
// resets the kernel's high-water mark of this process's RSS (VmHWM), so
// peakRSSMiB reports the peak of the workload that follows.
func resetPeakRSS() {
	debug.FreeOSMemory()
	// "5" resets the peak RSS (Linux 4.0 and later); without it the
	// figure is the process's peak so far.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSMiB is VmHWM from /proc/self/status, or the process's peak from
// getrusage where /proc is not there.
func peakRSSMiB() float64 {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					return kb / 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}
