// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// printFlagsEnv makes TestMain print the bench's own flags as parsed and
// exit: TestFlagsReachTheBench runs this binary with it.
const printFlagsEnv = "SLUICE_BENCH_PRINT_FLAGS"

// TestFlagsReachTheBench: -sluice-scale and -sluice-reps given on the
// command line reach the bench. scheduler_perf's InitTests parses the
// command line into a flag set of the flags defined before it and swallows
// the error for any other, so a flag defined after it was silently ignored.
func TestFlagsReachTheBench(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-sluice-scale=0.5", "-sluice-reps=3")
	cmd.Env = append(os.Environ(), printFlagsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	if want := "sluice-scale=0.5 sluice-reps=3"; !strings.Contains(string(out), want) {
		t.Fatalf("the bench saw its flags as\n%s\nwant %q", out, want)
	}
}

// TestWriteWorkloads: the expanded performance configuration runs every
// workload once per repetition, in a case of its configuration only
// (chosen by the workload's schedulerName), with the configurations in an
// order rotated by one each repetition, the full-size workloads scaled,
// and sluice's plugins among the per-plugin metrics.
func TestWriteWorkloads(t *testing.T) {
	out := filepath.Join(t.TempDir(), "expanded.yaml")
	const reps = 3
	info, err := writeWorkloads("performance-config.yaml", out, 0.5, reps)
	if err != nil {
		t.Fatal(err)
	}
	var source, expanded []struct {
		Name                   string
		SchedulerConfigPath    string
		MetricsCollectorConfig struct {
			Metrics map[string][]struct {
				Label  string
				Values []string
			}
		}
		Workloads []struct {
			Name   string
			Labels []string
			Params map[string]any
		}
	}
	read := func(file string, into any) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	read("performance-config.yaml", &source)
	read(out, &expanded)
	wantConfig := map[string]string{} // "<case>/<workload>" -> configuration
	for _, c := range source {
		for _, w := range c.Workloads {
			cfg, err := workloadConfig(w.Params)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.Name, w.Name, err)
			}
			wantConfig[c.Name+"/"+w.Name] = cfg
		}
	}

	runs := map[string]int{}         // "<case>/<workload>" -> repetitions
	order := map[string][][]string{} // case -> configurations per repetition
	for _, c := range expanded {
		f := strings.Split(c.Name, ".")
		if len(f) != 3 || !strings.HasPrefix(f[1], "r") {
			t.Fatalf("case %q: want <case>.r<rep>.<configuration>", c.Name)
		}
		var rep int
		if _, err := fmt.Sscanf(f[1], "r%d", &rep); err != nil || rep < 1 || rep > reps {
			t.Fatalf("case %q: repetition %q", c.Name, f[1])
		}
		if c.SchedulerConfigPath != configFile(f[2]) {
			t.Errorf("case %q runs under %q, want %q", c.Name, c.SchedulerConfigPath, configFile(f[2]))
		}
		for len(order[f[0]]) < rep {
			order[f[0]] = append(order[f[0]], nil)
		}
		order[f[0]][rep-1] = append(order[f[0]][rep-1], f[2])
		for _, w := range c.Workloads {
			if want := wantConfig[f[0]+"/"+w.Name]; want != f[2] {
				t.Errorf("%s/%s is in a case of the %s configuration, want %s", c.Name, w.Name, f[2], want)
			}
			for _, p := range []string{configParam, remoteStartParam} {
				if _, ok := w.Params[p]; ok {
					t.Errorf("%s/%s: parameter %s reaches scheduler_perf, which refuses parameters no operation uses", c.Name, w.Name, p)
				}
			}
			runs[f[0]+"/"+w.Name]++
			if _, ok := info[c.Name+"/"+w.Name]; !ok {
				t.Errorf("no workload info for %s/%s", c.Name, w.Name)
			}
		}
		plugins := c.MetricsCollectorConfig.Metrics["scheduler_plugin_execution_duration_seconds"]
		if len(plugins) == 0 || !slices.Contains(plugins[0].Values, "FabricTopology") || !slices.Contains(plugins[0].Values, "NodeResourcesFit") {
			t.Errorf("case %q: per-plugin metrics %v lack sluice's or upstream's plugins", c.Name, plugins)
		}
	}
	for _, c := range source {
		for _, w := range c.Workloads {
			if n := runs[c.Name+"/"+w.Name]; n != reps {
				t.Errorf("%s/%s runs %d times, want %d", c.Name, w.Name, n, reps)
			}
		}
		// Each configuration takes each place in the order once over as
		// many repetitions as there are configurations.
		reps := order[c.Name]
		for i := range reps[0] {
			seen := map[string]bool{}
			for _, r := range reps[:min(len(reps), len(reps[0]))] {
				seen[r[i]] = true
			}
			if len(seen) != min(len(reps), len(reps[0])) {
				t.Errorf("%s: configurations by repetition %v: place %d is always taken by the same", c.Name, reps, i)
			}
		}
	}
	// The ResearchClaim workloads run with and without make-before-break,
	// with a remote start delay.
	for _, cfg := range []string{configSluice, configBBM} {
		wi, ok := info["ResearchClaim.r1."+cfg+"/smoke_"+cfg]
		if !ok || wi.RemoteStart <= 0 {
			t.Errorf("ResearchClaim under %s: %+v (found %v), want a remote start delay", cfg, wi, ok)
		}
	}
	// The upstream baseline of ResearchClaim runs the stock configuration,
	// with no overflow node to start.
	if wi, ok := info["ResearchClaim.r1.stock/smoke_default"]; !ok || wi.Config != configStock || wi.RemoteStart != 0 {
		t.Errorf("ResearchClaim's baseline: %+v (found %v), want the stock configuration and no remote start", wi, ok)
	}
	// Sizes of full-size workloads halve; smoke sizes stay.
	for _, c := range expanded {
		for _, w := range c.Workloads {
			if c.Name == "SchedulingBasic.r1.stock" && w.Name == "5000Nodes_10000Pods_default" && w.Params["initNodes"] != 2500.0 {
				t.Errorf("%s/%s: initNodes %v, want 2500 at -sluice-scale=0.5", c.Name, w.Name, w.Params["initNodes"])
			}
			if strings.HasPrefix(c.Name, "SchedulingBasic.") && w.Name == "smoke_default" && w.Params["initNodes"] != 10.0 {
				t.Errorf("%s/%s: initNodes %v, want the smoke size 10 unscaled", c.Name, w.Name, w.Params["initNodes"])
			}
		}
	}
}
