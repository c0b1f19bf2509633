// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package bench is sluice's scale benchmark on upstream's own harness,
// k8s.io/kubernetes/test/integration/scheduler_perf: the same workloads
// under stock kube-scheduler, under sluice's shipped configuration and
// under a "ceiling" configuration without Filter or Score plugins. Every
// workload runs in a scheduler of its own, with a fresh etcd (a binary on
// PATH: `make bench` builds it from the pinned tool dependency) and
// kube-apiserver, -sluice-reps times, interleaved and in rotated order.
// `make bench` runs it and prints the comparison (cmd/sluice-benchreport).
package bench

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "k8s.io/component-base/logs/json/register"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/pkg/registry"
)

// scale multiplies the sizes of the full-size workloads (label "sluice"):
// -sluice-scale=0.2 runs them at a fifth of their nodes, pods and gangs.
var scale float64

// reps is how many times every workload runs (-sluice-reps).
var reps int

// generatedWorkloads is performance-config.yaml expanded: one test case per
// repetition and configuration, sizes scaled by -sluice-scale.
const generatedWorkloads = "performance-config.generated.yaml"

func TestMain(m *testing.M) {
	// Before InitTests, which parses the command line into a flag set of
	// its own made of the flags defined so far: a flag defined after it is
	// refused as "not defined" and ends the parse, silently.
	flag.Float64Var(&scale, "sluice-scale", 1, "multiply the node, pod and gang counts of the full-size workloads (label sluice) by this factor")
	flag.IntVar(&reps, "sluice-reps", 1, "run every workload this many times, interleaved, each repetition rotating the order of the configurations")
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	if os.Getenv(printFlagsEnv) != "" {
		fmt.Printf("sluice-scale=%v sluice-reps=%d\n", scale, reps)
		os.Exit(0)
	}
	if err := writeSchedulerConfigs(filepath.Join("..", "..", "manifests", "scheduler-config.yaml")); err != nil {
		fmt.Fprintf(os.Stderr, "generating the scheduler configurations: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// A workload runs under one of three scheduler configurations, each in a
// scheduler of its own (scheduler_perf starts one per workload) that holds
// only that configuration's profiles:
//   - stock: kube-scheduler's default profile alone, and no out-of-tree
//     plugin registered (bench_test.go);
//   - sluice: the shipped manifests/scheduler-config.yaml, both profiles, as
//     a cluster runs it;
//   - ceiling: one profile with no Filter or Score plugin: what is left is
//     the queue, binding and the apiserver, the most this machine can do;
//   - breakBeforeMake: sluice's with claims.makeBeforeBreak off, for the
//     ResearchClaim workload that measures both (a workload names it with
//     the parameter "config").
//
// Every configuration carries the shipped clientConnection; scheduler_perf
// gives its in-process scheduler QPS and burst 5000 whatever the file says
// (mustSetupCluster in its util.go), so client limits are the same for all.
const (
	configStock   = "stock"
	configSluice  = "sluice"
	configCeiling = "ceiling"
	configBBM     = "breakBeforeMake"
)

// configs are the configurations a workload's "config" parameter may name.
var configs = []string{configStock, configSluice, configCeiling, configBBM}

// workloadConfig is the configuration a workload runs under: the one its
// "config" parameter names, else configOf its schedulerName parameter.
func workloadConfig(params map[string]any) (string, error) {
	if v, ok := params[configParam]; ok {
		name, _ := v.(string)
		if !slices.Contains(configs, name) {
			return "", fmt.Errorf("params.%s: %v is not one of %v", configParam, v, configs)
		}
		return name, nil
	}
	name, _ := params["schedulerName"].(string)
	return configOf(name), nil
}

// configOf is the configuration a workload runs under, by the scheduler
// name its pods use (none: sluice's, for cases whose templates name it).
func configOf(schedulerName string) string {
	switch schedulerName {
	case "default-scheduler":
		return configStock
	case "ceiling":
		return configCeiling
	default:
		return configSluice
	}
}

// configFile is where the configuration named name is generated.
func configFile(name string) string {
	return "scheduler-config." + name + ".generated.yaml"
}

const ceilingProfile = `
schedulerName: ceiling
plugins:
  multiPoint:
    disabled: [{name: "*"}]
    enabled: [{name: PrioritySort}, {name: DefaultBinder}]
`

// writeSchedulerConfigs writes the three configurations, from the shipped
// one.
func writeSchedulerConfigs(shipped string) error {
	data, err := os.ReadFile(shipped)
	if err != nil {
		return err
	}
	// The return waits seconds, not minutes, before and between its waves,
	// as in the demo: the ResearchClaim workload measures the return too.
	// scheduler_perf creates its namespaces without labels: the tenancy
	// policy selects every namespace by the label each one has, so its
	// lookups are still made per pod.
	if data, err = registry.MergePluginArgs(data, map[string]map[string]any{"OverflowPreemption": {"return": benchReturn, "overflow": benchTenancy}}); err != nil {
		return fmt.Errorf("%s: %w", shipped, err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", shipped, err)
	}
	sluiceProfiles, ok := cfg["profiles"].([]any)
	if !ok || len(sluiceProfiles) == 0 {
		return fmt.Errorf("%s: no profiles", shipped)
	}
	var ceiling map[string]any
	if err := yaml.Unmarshal([]byte(ceilingProfile), &ceiling); err != nil {
		return err
	}
	bbm, err := profilesWith(data, map[string]any{"makeBeforeBreak": false})
	if err != nil {
		return fmt.Errorf("%s: %w", shipped, err)
	}
	profiles := map[string][]any{
		configStock:   {map[string]any{"schedulerName": "default-scheduler"}},
		configSluice:  sluiceProfiles,
		configCeiling: {ceiling},
		configBBM:     bbm,
	}
	for name, p := range profiles {
		gen := map[string]any{"apiVersion": cfg["apiVersion"], "kind": cfg["kind"], "profiles": p}
		if cc, ok := cfg["clientConnection"]; ok {
			gen["clientConnection"] = cc
		}
		body, err := yaml.Marshal(gen)
		if err != nil {
			return err
		}
		header := fmt.Sprintf("# Generated by test/bench from %s, the %s configuration; do not edit.\n", shipped, name)
		if err := os.WriteFile(configFile(name), append([]byte(header), body...), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// benchReturn are the return controller's settings in the bench's sluice
// configurations (the shipped waits are 120 s before the first wave and
// 30 s between waves of 10 pods).
var benchReturn = map[string]any{"hysteresisSeconds": 5, "minWaveIntervalSeconds": 1, "pollIntervalSeconds": 1, "maxPodsPerWave": 500}

// benchTenancy lets every namespace run research and production.
var benchTenancy = map[string]any{
	"researchNamespaces":   everyNamespace(),
	"productionNamespaces": everyNamespace(),
}

func everyNamespace() map[string]any {
	return map[string]any{"matchLabels": nil, "matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "Exists"}}}
}

// profilesWith is the profiles of config with the OverflowPreemption
// plugin's claims args patched.
func profilesWith(config []byte, claims map[string]any) ([]any, error) {
	data, err := registry.MergePluginArgs(config, map[string]map[string]any{"OverflowPreemption": {"claims": claims}})
	if err != nil {
		return nil, err
	}
	var cfg struct{ Profiles []any }
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	return cfg.Profiles, nil
}

// sizeParams are the workload parameters that count nodes, pods or gangs;
// a gang's size (podsPerGroup) is a shape, not a size, and is kept.
var sizeParams = map[string]bool{
	"initNodes": true, "initPods": true, "measurePods": true, "nodes": true,
	"gangs": true, "deployments": true, "gangPods": true, "fillPods": true,
	"gangs0": true, "gangs1": true, "gangs2": true, "gangs3": true,
	"gangs4": true, "gangs5": true, "gangs6": true,
}

// workloadInfo is what the bench needs to know of a generated workload
// beyond what scheduler_perf reads.
type workloadInfo struct {
	// Pods is how many pods it creates (churn excluded): the denominator
	// of CPU seconds per 1,000 pods.
	Pods int
	// GangPods is the research gang's size (ResearchClaim only).
	GangPods int
	// RemoteStart is how long the overflow node's provider takes to start
	// a workload (parameter remoteStartSeconds: ResearchClaim only).
	RemoteStart time.Duration
	// Config is the configuration it runs under.
	Config string
}

// Parameters the bench reads and takes out of a workload before
// scheduler_perf sees it (it refuses parameters no operation uses).
const (
	configParam      = "config"
	remoteStartParam = "remoteStartSeconds"
)

// writeWorkloads writes the performance configuration expanded for the run:
// each case becomes one case per repetition and configuration, named
// "<case>.r<repetition>.<configuration>" and holding that configuration's
// workloads, in the order
//
//	r1: stock, sluice, ceiling   r2: sluice, ceiling, stock   r3: ceiling, stock, sluice
//
// (the configurations in the order the case first uses them, rotated by one
// each repetition), so a slow start or a warm cache favours no variant. The
// sizes of the full-size workloads are multiplied by factor, and every case
// collects scheduler_perf's default metrics with sluice's plugins added to
// the per-plugin ones. It returns what the bench needs of each workload, by
// "<generated case>/<workload>".
func writeWorkloads(in, out string, factor float64, reps int) (map[string]workloadInfo, error) {
	if factor <= 0 {
		return nil, fmt.Errorf("-sluice-scale must be positive, got %v", factor)
	}
	if reps < 1 {
		return nil, fmt.Errorf("-sluice-reps must be at least 1, got %d", reps)
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return nil, err
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(data, &cases); err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	info := map[string]workloadInfo{}
	var expanded []map[string]any
	for _, c := range cases {
		if _, ok := c["schedulerConfigPath"]; ok {
			return nil, fmt.Errorf("%s: case %v sets schedulerConfigPath: the configuration follows each workload's schedulerName or config parameter", in, c["name"])
		}
		byConfig := map[string][]any{}
		byName := map[string]workloadInfo{}
		var order []string
		workloads, _ := c["workloads"].([]any)
		for _, w := range workloads {
			wl, _ := w.(map[string]any)
			params, _ := wl["params"].(map[string]any)
			if hasLabel(wl, "sluice") {
				for k, v := range params {
					if n, ok := v.(float64); ok && sizeParams[k] {
						params[k] = math.Max(1, math.Round(n*factor))
					}
				}
			}
			cfg, err := workloadConfig(params)
			if err != nil {
				return nil, fmt.Errorf("%s: %v/%v: %w", in, c["name"], wl["name"], err)
			}
			gang, _ := params["gangPods"].(float64)
			wi := workloadInfo{Pods: podsOf(params), GangPods: int(gang), Config: cfg}
			if v, ok := params[remoteStartParam]; ok {
				secs, ok := v.(float64)
				if !ok || secs < 0 {
					return nil, fmt.Errorf("%s: %v/%v: params.%s: want a number of seconds, got %v", in, c["name"], wl["name"], remoteStartParam, v)
				}
				wi.RemoteStart = time.Duration(secs * float64(time.Second))
				delete(params, remoteStartParam)
			}
			delete(params, configParam)
			byName[fmt.Sprint(wl["name"])] = wi
			if _, seen := byConfig[cfg]; !seen {
				order = append(order, cfg)
			}
			byConfig[cfg] = append(byConfig[cfg], wl)
		}
		collect, err := metricsConfig(c["metricsCollectorConfig"])
		if err != nil {
			return nil, fmt.Errorf("%s: case %v: %w", in, c["name"], err)
		}
		for r := range reps {
			for i := range order {
				cfg := order[(i+r)%len(order)]
				gen := maps.Clone(c)
				gen["name"] = fmt.Sprintf("%v.r%d.%s", c["name"], r+1, cfg)
				gen["schedulerConfigPath"] = configFile(cfg)
				gen["workloads"] = byConfig[cfg]
				gen["metricsCollectorConfig"] = collect
				for _, w := range byConfig[cfg] {
					name := fmt.Sprint(w.(map[string]any)["name"])
					info[fmt.Sprintf("%v/%v", gen["name"], name)] = byName[name]
				}
				expanded = append(expanded, gen)
			}
		}
	}
	body, err := yaml.Marshal(expanded)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Generated by test/bench from %s with -sluice-scale=%v -sluice-reps=%d; do not edit.\n", in, factor, reps)
	return info, os.WriteFile(out, append([]byte(header), body...), 0o644)
}

// metricsConfig is scheduler_perf's default metrics collection with
// sluice's plugins added to the per-plugin metrics, plus what the case
// itself asks for (own, its metricsCollectorConfig). A case that names a
// metric replaces the default collection of that metric.
func metricsConfig(own any) (map[string]any, error) {
	type lv = map[string]any
	plugins := slices.Sorted(maps.Keys(registry.New().Registry()))
	plugins = append(slices.Clone(perf.PluginNames), plugins...)
	events := schedframework.AllClusterEventLabels()
	m := map[string]any{
		"scheduler_framework_extension_point_duration_seconds": []lv{{"label": "extension_point", "values": metrics.ExtensionPoints}},
		"scheduler_scheduling_attempt_duration_seconds":        []lv{{"label": "result", "values": []string{metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}}},
		"scheduler_pod_scheduling_duration_seconds":            nil,
		"scheduler_plugin_execution_duration_seconds": []lv{
			{"label": "plugin", "values": plugins},
			{"label": "extension_point", "values": metrics.ExtensionPoints},
		},
		"scheduler_queueing_hint_execution_duration_seconds": []lv{
			{"label": "plugin", "values": plugins},
			{"label": "event", "values": events},
		},
		"scheduler_event_handling_duration_seconds":                []lv{{"label": "event", "values": events}},
		"scheduler_podgroup_scheduling_attempt_duration_seconds":   []lv{{"label": "result", "values": []string{metrics.WaitingOnPreemptionResult, metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}}},
		"scheduler_podgroup_scheduling_algorithm_duration_seconds": nil,
	}
	if own == nil {
		return map[string]any{"metrics": m}, nil
	}
	o, _ := own.(map[string]any)
	extra, ok := o["metrics"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metricsCollectorConfig has no metrics map")
	}
	maps.Copy(m, extra)
	return map[string]any{"metrics": m}, nil
}

// podsOf counts the pods a workload creates from its parameters (churn
// excluded): the denominator of CPU seconds per 1,000 pods.
func podsOf(params map[string]any) int {
	n := func(k string) int {
		v, _ := params[k].(float64)
		return int(v)
	}
	pods := n("initPods") + n("measurePods") + n("deployments")*n("replicas") + n("gangPods") + n("gangs")*n("podsPerGroup") + n("fillPods")
	for c := range 7 { // FabricGangs' size classes
		pods += n(fmt.Sprintf("gangs%d", c)) * n(fmt.Sprintf("size%d", c))
	}
	return pods
}

func hasLabel(workload map[string]any, label string) bool {
	labels, _ := workload["labels"].([]any)
	for _, l := range labels {
		if l == label {
			return true
		}
	}
	return false
}
