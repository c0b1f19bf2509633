// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-sim replays public traces through the real scheduler
// (internal/sim) under several policies and writes CSV, a Markdown summary and
// SVG charts:
//
//	sluice-sim -data ../shared/data/traces -out _output/sim
//
// Experiments: fgd (openb GPU fragmentation, the FGD method), tiresias
// (Tiresias jobs as gangs on its 5x32x8 cluster), lingjun (the same jobs,
// eight times larger, on the 847-host Lingjun fabric), dlrm (DLRM
// inference services packed on the Lingjun fabric), queue (300 gangs of
// 1-256 GPUs arriving faster than 1,024 GPUs run them), and -scenario FILE
// (a mixed research/production timeline, sluice only).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/internal/sim"
	"github.com/sluice-sched/sluice/internal/traces"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/registry"
)

type options struct {
	data, config, out, logFile, scenario string
	experiments, policies, gangPolicies  string
	queuePolicies                        string
	queueGap, queueRun                   time.Duration
	queueJobs                            int
	fgdTrace                             string
	arrival, dlrmFill                    float64
	seed                                 uint64
	maxArrivals, repeat, maxJobs         int
	check                                bool
}

func main() {
	var o options
	flag.StringVar(&o.data, "data", "../shared/data/traces", "directory of the public traces (read, never copied)")
	flag.StringVar(&o.config, "config", "manifests/scheduler-config.yaml", "sluice's scheduler configuration")
	flag.StringVar(&o.out, "out", "_output/sim", "directory for CSV, summary.md and SVG charts")
	flag.StringVar(&o.logFile, "log", "", "file for the components' logs (default: discarded)")
	flag.StringVar(&o.experiments, "experiments", "fgd,tiresias,lingjun,dlrm,queue", "experiments to run: fgd, tiresias, lingjun, dlrm, queue")
	flag.StringVar(&o.scenario, "scenario", "", "a scenario YAML (see internal/sim.Scenario) to play with sluice")
	flag.StringVar(&o.policies, "policies", "default,default+MostAllocated,sluice", "policies for fgd and dlrm")
	flag.StringVar(&o.gangPolicies, "gang-policies", "default,upstream-TopologyPlacement,sluice", "policies for the gang experiments")
	flag.StringVar(&o.fgdTrace, "fgd-trace", "default", "openb pod list: default, gpushare100, multigpu20 or multigpu50")
	flag.Float64Var(&o.arrival, "arrival", 1.3, "FGD: pods arrive until requested GPUs reach this share of capacity")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the FGD arrival sample")
	flag.IntVar(&o.maxArrivals, "max-arrivals", 0, "FGD: stop after this many arrivals (0: all; for smoke runs)")
	flag.IntVar(&o.repeat, "repeat", 10, "gang experiments: play the 60-job trace this many times, back to back")
	flag.IntVar(&o.maxJobs, "max-jobs", 0, "gang experiments: stop after this many jobs (0: all)")
	flag.StringVar(&o.queuePolicies, "queue-policies", "default,default+MostAllocated,upstream-TopologyPlacement,sluice", "policies for the queue experiment")
	flag.IntVar(&o.queueJobs, "queue-jobs", 300, "queue: gangs (1-256 GPUs) on 1,024 GPUs")
	flag.DurationVar(&o.queueGap, "queue-gap", 20*time.Second, "queue: mean time between arrivals (simulated)")
	flag.DurationVar(&o.queueRun, "queue-run", 20*time.Minute, "queue: mean run time of a gang (simulated)")
	flag.Float64Var(&o.dlrmFill, "dlrm-fill", 0.5, "dlrm: place one-GPU services until this share of GPUs is requested")
	flag.BoolVar(&o.check, "check", false, "fail unless the report shows the whole story: figures for every policy, every gang placed, every pod moved to overflow back (smoke runs)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "sluice-sim: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	sluiceConfig, err := os.ReadFile(o.config)
	if err != nil {
		return fmt.Errorf("reading the sluice configuration: %w", err)
	}
	policies, err := sim.Policies(split(o.policies), sluiceConfig, "network.topology.nvidia.com/leaf")
	if err != nil {
		return err
	}
	gangPolicies, err := sim.Policies(split(o.gangPolicies), sluiceConfig, "network.topology.nvidia.com/leaf")
	if err != nil {
		return err
	}
	// The ResearchClaim CRD beside the configuration, as manifests/ ships them.
	envOpts := sim.EnvOptions{CRDs: []string{filepath.Join(filepath.Dir(o.config), "crds", "claims.sluice.dev_researchclaims.yaml")}}
	var logs io.Writer = io.Discard
	if o.logFile != "" {
		f, err := os.Create(o.logFile)
		if err != nil {
			return err
		}
		defer f.Close()
		envOpts.Log = f
		logs = f
	}
	// The components log through klog; keep the terminal for the progress bar.
	klog.LogToStderr(false)
	klog.SetOutput(logs)
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("stderrthreshold", "FATAL")
	defer klog.Flush()
	report := &sim.Report{Gangs: map[string][]sim.GangResult{}}
	report.Notes = append(report.Notes, fmt.Sprintf("traces from %s; every policy runs on its own kube-apiserver with sluice-scheduler in-process (the binary's start-up path)", o.data))
	for _, e := range split(o.experiments) {
		switch e {
		case "fgd":
			if err := fgd(ctx, o, policies, envOpts, report); err != nil {
				return err
			}
		case "tiresias", "lingjun":
			if err := gangs(ctx, o, e, gangPolicies, envOpts, report); err != nil {
				return err
			}
		case "dlrm":
			if err := dlrm(ctx, o, policies, envOpts, report); err != nil {
				return err
			}
		case "queue":
			queuePolicies, err := sim.Policies(split(o.queuePolicies), sluiceConfig, configv1.DefaultLeafLabel)
			if err != nil {
				return err
			}
			if err := queue(ctx, o, queuePolicies, envOpts, report); err != nil {
				return err
			}
		case "":
		default:
			return fmt.Errorf("unknown experiment %q", e)
		}
	}
	if o.scenario != "" {
		if err := scenario(ctx, o, sluiceConfig, envOpts, report); err != nil {
			return err
		}
	}
	summary, err := report.Write(o.out)
	if err != nil {
		return err
	}
	fmt.Printf("report: %s\n", summary)
	if o.check {
		if err := report.Check(); err != nil {
			return fmt.Errorf("the report is not what a full run shows:\n%w", err)
		}
	}
	return nil
}

func fgd(ctx context.Context, o options, policies []sim.Policy, envOpts sim.EnvOptions, report *sim.Report) error {
	nodes, err := traces.ReadFile(filepath.Join(o.data, "openb", "openb_node_list_gpu_node.csv"), traces.ReadOpenbNodes)
	if err != nil {
		return err
	}
	pods, err := traces.ReadFile(filepath.Join(o.data, "openb", "openb_pod_list_"+o.fgdTrace+".csv"), traces.ReadOpenbPods)
	if err != nil {
		return err
	}
	var specs []sim.NodeSpec
	capacity := 0
	for _, n := range nodes {
		specs = append(specs, sim.NodeSpec{Name: n.Name, GPUs: n.GPUs, MilliCPU: n.MilliCPU, MemoryMiB: n.MemoryMiB,
			Labels: map[string]string{"gpu.sluice.dev/model": n.Model}})
		capacity += n.GPUs
	}
	sample := traces.FGDSample(pods, capacity, o.arrival, o.seed)
	if o.maxArrivals > 0 && len(sample) > o.maxArrivals {
		sample = sample[:o.maxArrivals]
	}
	fractional := 0
	arrivals := make([]sim.Arrival, len(sample))
	for i, p := range sample {
		if p.Fractional() {
			fractional++
		}
		arrivals[i] = sim.Arrival{
			Pod:           sim.PodSpec{Name: fmt.Sprintf("a%05d", i), GPUs: p.WholeGPUs(), MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB},
			RequestedGPUs: float64(p.RequestedGPUMilli()) / 1000,
		}
	}
	report.Notes = append(report.Notes, fmt.Sprintf("fgd: openb_pod_list_%s.csv sampled (seed %d) until %.0f%% of %d GPUs on %d nodes were requested: %d arrivals, %d of them asking for part of a GPU, rounded up to one whole GPU",
		o.fgdTrace, o.seed, o.arrival*100, capacity, len(nodes), len(arrivals), fractional))
	levels := []float64{}
	for l := 0.1; l <= o.arrival+1e-9; l += 0.1 {
		levels = append(levels, math.Round(l*10)/10)
	}
	for _, p := range policies {
		res, err := withEnv(ctx, p, envOpts, func(env *sim.Env) (sim.FGDResult, error) {
			return sim.RunFGD(ctx, env, specs, arrivals, levels, bar("fgd "+p.Name))
		})
		if err != nil {
			return err
		}
		report.FGD = append(report.FGD, res)
	}
	return nil
}

func gangs(ctx context.Context, o options, which string, policies []sim.Policy, envOpts sim.EnvOptions, report *sim.Report) error {
	jobs, err := traces.ReadFile(filepath.Join(o.data, "tiresias", "60_job.csv"), traces.ReadTiresiasJobs)
	if err != nil {
		return err
	}
	var nodes []sim.NodeSpec
	var gangJobs []sim.GangJob
	var span time.Duration
	for _, j := range jobs {
		span = max(span, time.Duration(j.Submit)*time.Second)
	}
	span += time.Minute
	for r := 0; r < o.repeat; r++ {
		for _, j := range jobs {
			g := sim.GangJob{Name: fmt.Sprintf("job-%d-%d", r, j.ID), Submit: time.Duration(r)*span + time.Duration(j.Submit)*time.Second,
				Duration: time.Duration(j.Duration) * time.Second}
			if which == "tiresias" {
				// Data-parallel workers: one pod per GPU.
				g.Pods, g.GPUsPerPod = j.GPUs, 1
			} else {
				// Eight times larger: one 8-GPU pod per GPU of the original.
				g.Pods, g.GPUsPerPod = j.GPUs, 8
			}
			gangJobs = append(gangJobs, g)
		}
	}
	if o.maxJobs > 0 && len(gangJobs) > o.maxJobs {
		gangJobs = gangJobs[:o.maxJobs]
	}
	var name string
	switch which {
	case "tiresias":
		c, err := traces.ReadFile(filepath.Join(o.data, "tiresias", "n160g8.csv"), traces.ReadTiresiasCluster)
		if err != nil {
			return err
		}
		for s := 0; s < c.Switches; s++ {
			for n := 0; n < c.NodesPerSwitch; n++ {
				nodes = append(nodes, sim.NodeSpec{Name: fmt.Sprintf("sw%dn%02d", s, n), Leaf: fmt.Sprintf("sw%d", s), Spine: "core", Block: "dc",
					GPUs: c.GPUsPerNode, MilliCPU: int64(c.CPUsPerNode) * 1000, MemoryMiB: int64(c.MemoryGiB) << 10})
			}
		}
		name = fmt.Sprintf("Tiresias 60-job trace x%d, one 1-GPU pod per GPU, on %dx%dx%d GPUs", o.repeat, c.Switches, c.NodesPerSwitch, c.GPUsPerNode)
	case "lingjun":
		hosts, err := traces.ReadFile(filepath.Join(o.data, "alibaba_lingjun2023_topo.csv"), traces.ReadLingjunTopology)
		if err != nil {
			return err
		}
		for i, h := range hosts {
			nodes = append(nodes, sim.NodeSpec{Name: fmt.Sprintf("lj%03d", i), Leaf: h.Core + "-" + h.Pod + "-" + h.Leaf, Spine: h.Core + "-" + h.Pod, Block: h.Core, GPUs: 8})
		}
		name = fmt.Sprintf("Tiresias jobs x%d scaled to 8-GPU pods, on the %d-host Lingjun 3-tier fabric", o.repeat, len(hosts))
	}
	for _, p := range policies {
		res, err := withEnv(ctx, p, envOpts, func(env *sim.Env) (sim.GangResult, error) {
			return sim.RunGangs(ctx, env, nodes, gangJobs, bar(which+" "+p.Name))
		})
		if err != nil {
			return err
		}
		report.Gangs[name] = append(report.Gangs[name], res)
	}
	return nil
}

// queue runs the high-occupancy gang workload (sim.QueueJobs) on 1,024
// GPUs: 4 spines x 4 leaves x 8 nodes x 8 GPUs, so a leaf holds 64 GPUs and
// a spine 256; arrivals outrun the cluster and gangs queue.
func queue(ctx context.Context, o options, policies []sim.Policy, envOpts sim.EnvOptions, report *sim.Report) error {
	nodes := sim.Fabric(1, 4, 4, 8, 8)
	key := func(gpus int) string {
		switch {
		case gpus <= 64:
			return configv1.DefaultLeafLabel
		case gpus <= 256:
			return configv1.DefaultSpineLabel
		}
		return configv1.DefaultBlockLabel
	}
	jobs := sim.QueueJobs(o.queueJobs, o.seed, o.queueGap, o.queueRun, key)
	if o.maxJobs > 0 && len(jobs) > o.maxJobs {
		jobs = jobs[:o.maxJobs]
	}
	name := fmt.Sprintf("high occupancy, %d gangs of 1-256 GPUs arriving every %s on average (runs of %s on average), on 1,024 GPUs (4 spines x 4 leaves x 8 nodes x 8)",
		len(jobs), o.queueGap, o.queueRun)
	for _, p := range policies {
		res, err := withEnv(ctx, p, envOpts, func(env *sim.Env) (sim.GangResult, error) {
			return sim.RunGangs(ctx, env, nodes, jobs, bar("queue "+p.Name))
		})
		if err != nil {
			return err
		}
		report.Gangs[name] = append(report.Gangs[name], res)
	}
	return nil
}

func dlrm(ctx context.Context, o options, policies []sim.Policy, envOpts sim.EnvOptions, report *sim.Report) error {
	instances, err := traces.ReadFile(filepath.Join(o.data, "alibaba_v2025_disaggregated_DLRM_trace.csv"), traces.ReadDLRMInstances)
	if err != nil {
		return err
	}
	hosts, err := traces.ReadFile(filepath.Join(o.data, "alibaba_lingjun2023_topo.csv"), traces.ReadLingjunTopology)
	if err != nil {
		return err
	}
	var nodes []sim.NodeSpec
	for i, h := range hosts {
		nodes = append(nodes, sim.NodeSpec{Name: fmt.Sprintf("lj%03d", i), Leaf: h.Core + "-" + h.Pod + "-" + h.Leaf, Spine: h.Core + "-" + h.Pod, Block: h.Core, GPUs: 8})
	}
	budget := int(o.dlrmFill * float64(8*len(hosts)))
	var pods []sim.PodSpec
	for _, in := range instances {
		if in.GPUs == 0 {
			continue
		}
		if budget -= in.GPUs; budget < 0 {
			break
		}
		pods = append(pods, sim.PodSpec{Name: fmt.Sprintf("svc-%05d", len(pods)), GPUs: in.GPUs, MilliCPU: min(in.MilliCPU, 16000), MemoryMiB: 4096})
	}
	report.Notes = append(report.Notes, fmt.Sprintf("dlrm: the first %d GPU instances of the DLRM trace (one GPU each, file order; CPU capped at 16 cores, 4 GiB memory), placed on the %d Lingjun hosts x 8 GPUs until %.0f%% of GPUs were requested; max_instance_per_node is not modelled",
		len(pods), len(hosts), o.dlrmFill*100))
	for _, p := range policies {
		res, err := withEnv(ctx, p, envOpts, func(env *sim.Env) (sim.PackingResult, error) {
			return sim.RunPacking(ctx, env, nodes, pods, bar("dlrm "+p.Name))
		})
		if err != nil {
			return err
		}
		report.Packing = append(report.Packing, res)
	}
	return nil
}

func scenario(ctx context.Context, o options, sluiceConfig []byte, envOpts sim.EnvOptions, report *sim.Report) error {
	s, err := sim.LoadScenario(o.scenario)
	if err != nil {
		return err
	}
	if sluiceConfig, err = registry.MergePluginArgs(sluiceConfig, s.PluginArgs); err != nil {
		return fmt.Errorf("%s: pluginArgs: %w", o.scenario, err)
	}
	policies, err := sim.Policies([]string{sim.PolicySluice}, sluiceConfig, "")
	if err != nil {
		return err
	}
	envOpts.Controllers = true
	res, err := withEnv(ctx, policies[0], envOpts, func(env *sim.Env) (sim.ScenarioResult, error) {
		return sim.RunScenario(ctx, env, s, 500*time.Millisecond, bar("scenario "+s.Name))
	})
	if err != nil {
		return err
	}
	report.Scenario = append(report.Scenario, res)
	return nil
}

// withEnv runs f on a fresh environment for policy p.
func withEnv[T any](ctx context.Context, p sim.Policy, opts sim.EnvOptions, f func(*sim.Env) (T, error)) (T, error) {
	var zero T
	env, err := sim.NewEnv(ctx, p, opts)
	if err != nil {
		return zero, err
	}
	defer env.Close()
	return f(env)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
