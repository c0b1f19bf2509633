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
//     the queue, binding and the apiserver, the most this machine can do.
//
// Every configuration carries the shipped clientConnection; scheduler_perf
// gives its in-process scheduler QPS and burst 5000 whatever the file says
// (mustSetupCluster in its util.go), so client limits are the same for all.
const (
	configStock   = "stock"
	configSluice  = "sluice"
	configCeiling = "ceiling"
)

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
	profiles := map[string][]any{
		configStock:   {map[string]any{"schedulerName": "default-scheduler"}},
		configSluice:  sluiceProfiles,
		configCeiling: {ceiling},
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

// sizeParams are the workload parameters that count nodes, pods or gangs;
// a gang's size (podsPerGroup) is a shape, not a size, and is kept.
var sizeParams = map[string]bool{
	"initNodes": true, "initPods": true, "measurePods": true, "nodes": true,
	"gangs": true, "deployments": true, "gangPods": true, "fillPods": true,
	"gangs0": true, "gangs1": true, "gangs2": true, "gangs3": true,
	"gangs4": true, "gangs5": true, "gangs6": true,
}

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
// the per-plugin ones. It returns the pods each workload creates, by
// "<generated case>/<workload>".
func writeWorkloads(in, out string, factor float64, reps int) (map[string]int, error) {
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
	pods := map[string]int{}
	var expanded []map[string]any
	for _, c := range cases {
		if _, ok := c["schedulerConfigPath"]; ok {
			return nil, fmt.Errorf("%s: case %v sets schedulerConfigPath: the configuration follows each workload's schedulerName", in, c["name"])
		}
		byConfig := map[string][]any{}
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
			name, _ := params["schedulerName"].(string)
			cfg := configOf(name)
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
					wl := w.(map[string]any)
					params, _ := wl["params"].(map[string]any)
					pods[fmt.Sprintf("%v/%v", gen["name"], wl["name"])] = podsOf(params)
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
	return pods, os.WriteFile(out, append([]byte(header), body...), 0o644)
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
