// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-benchreport turns one `make bench` run (scheduler_perf's
// JSON and test/bench's process-usage JSON) into the comparison table:
// every workload under stock kube-scheduler, under sluice's configuration
// and under the ceiling, each repetition apart and summed up as the median
// and range, with sluice's ratio to the baseline taken repetition by
// repetition.
//
//	sluice-benchreport -dir _output/bench -json _output/bench/report.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	dir := flag.String("dir", "_output/bench", "directory holding scheduler_perf's BenchmarkPerfScheduling_*.json and sluice-process-usage.json")
	jsonOut := flag.String("json", "", "also write the report as JSON to this file")
	check := flag.Bool("check", false, "fail unless every workload scheduled under every variant and the research claim moved production and placed its gang (smoke runs)")
	flag.Parse()
	rep, err := load(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice-benchreport: %v\n", err)
		os.Exit(1)
	}
	rep.write(os.Stdout)
	if *jsonOut != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sluice-benchreport: writing %s: %v\n", *jsonOut, err)
			os.Exit(1)
		}
	}
	if *check {
		if err := rep.check(); err != nil {
			fmt.Fprintf(os.Stderr, "sluice-benchreport: the run is not what a full run shows:\n%v\n", err)
			os.Exit(1)
		}
	}
}

// check says what is missing from a run that must show everything: a
// measured schedule for every workload under every variant, and a research
// claim that evicted production in at least one wave and then ran its gang.
// A schedule is measured when scheduler_perf recorded a throughput or, for a
// run that ends before its first one-second throughput sample (the smoke
// sizes on a fast machine), a scheduling duration.
func (r *Report) check() error {
	var errs []error
	claims := 0
	for _, row := range r.Rows {
		for _, v := range row.Variants {
			for _, run := range v.Runs {
				if (run.Throughput <= 0 && run.Duration <= 0) || run.Pods == 0 {
					errs = append(errs, fmt.Errorf("%s under %s, repetition %d: no pods scheduled (throughput %.1f, duration %.1fs, %d pods)", row.Workload, v.Name, run.Rep, run.Throughput, run.Duration, run.Pods))
				}
				if row.Case == "ResearchClaim" && v.Name == "sluice" {
					claims++
					if run.Victims < 1 || run.Waves < 1 || run.ClaimSeconds <= 0 {
						errs = append(errs, fmt.Errorf("%s, repetition %d: the claim did not complete (victims %.0f, waves %.0f, room free after %.1fs)", row.Workload, run.Rep, run.Victims, run.Waves, run.ClaimSeconds))
					}
				}
			}
		}
	}
	if claims == 0 {
		errs = append(errs, errors.New("no ResearchClaim run under sluice"))
	}
	return errors.Join(errs...)
}

// Run is one repetition of one workload under one variant.
type Run struct {
	// Rep is the repetition, from 1 (the case name's ".r<rep>.").
	Rep int `json:"rep"`
	// Throughput is scheduler_perf's SchedulingThroughput in pods/s
	// (average and median of its one-second samples).
	Throughput       float64 `json:"throughputAvg"`
	ThroughputMedian float64 `json:"throughputP50"`
	// Duration is the measured pods' scheduling duration in seconds.
	Duration float64 `json:"durationSeconds"`
	// AttemptP99 is the 99th percentile of one pod's scheduling attempt in
	// milliseconds, by result ("scheduled", "unschedulable", "error");
	// GroupAttemptP99 the same for one pod group's attempt.
	AttemptP99      map[string]float64 `json:"attemptP99Ms,omitempty"`
	GroupAttemptP99 map[string]float64 `json:"podGroupAttemptP99Ms,omitempty"`
	// HeapP50MB and HeapMaxMB are the harness's samples of the Go heap in
	// use (HeapInuse, every 0.5 s of the measured phase) of the test
	// process: scheduler and kube-apiserver.
	HeapP50MB float64 `json:"heapP50MB,omitempty"`
	HeapMaxMB float64 `json:"heapMaxMB,omitempty"`
	// PluginP99 is each plugin's 99th percentile per extension point in
	// milliseconds ("Plugin/ExtensionPoint"), over the cycles the scheduler
	// samples for plugin metrics.
	PluginP99 map[string]float64 `json:"pluginP99Ms,omitempty"`
	// CPUSeconds is the test process's CPU over the whole workload (start-up,
	// node and pod creation and teardown included; apiserver and scheduler
	// together); Pods the pods the workload created.
	CPUSeconds float64 `json:"cpuSeconds"`
	Pods       int     `json:"pods"`
	// Claim figures (ResearchClaim only).
	ClaimSeconds float64 `json:"claimSeconds,omitempty"`
	Victims      float64 `json:"victims,omitempty"`
	Waves        float64 `json:"waves,omitempty"`
}

// Stat is the median and range of one figure over the repetitions.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// stat sums up the positive values (a zero is a figure not measured).
func stat(values []float64) Stat {
	var v []float64
	for _, x := range values {
		if x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Stat{}
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{Median: m, Min: v[0], Max: v[len(v)-1], N: len(v)}
}

func (s Stat) String() string { return s.format(1) }

func (s Stat) format(prec int) string {
	switch {
	case s.N == 0:
		return "-"
	case s.N == 1:
		return fmt.Sprintf("%.*f", prec, s.Median)
	default:
		return fmt.Sprintf("%.*f (%.*f-%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
	}
}

// Variant is one workload's repetitions under one variant.
type Variant struct {
	// Name is the profile or upstream plugin set: default, sluice,
	// ceiling, GangScheduling, TopologyPlacement.
	Name string `json:"variant"`
	Runs []Run  `json:"runs"`
	// Throughput sums up the runs' average pods/s.
	Throughput Stat `json:"throughput"`
}

// Row is one workload shape with all its variants.
type Row struct {
	Case     string    `json:"case"`
	Workload string    `json:"workload"`
	Variants []Variant `json:"variants"`
	// Ratio is sluice's throughput over the baseline's (default, or
	// GangScheduling for gangs) and RatioToCeiling over the ceiling's,
	// each taken within one repetition and summed up over them.
	Baseline       string `json:"baseline,omitempty"`
	Ratio          Stat   `json:"sluiceOverBaseline"`
	RatioToCeiling Stat   `json:"sluiceOverCeiling"`
}

// Report is the whole run.
type Report struct {
	Source string `json:"source"`
	Rows   []Row  `json:"rows"`
	// Plugins are sluice's plugin names (the bench's sluice-plugins.json),
	// whose latencies the report lists.
	Plugins []string `json:"sluicePlugins,omitempty"`
}

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

type usage struct {
	Workload   string  `json:"workload"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Pods       int     `json:"pods"`
}

// variants are the workload-name suffixes that name a variant.
func variants() []string {
	return []string{"default", "GangScheduling", "TopologyPlacement", "sluice", "ceiling"}
}

// splitName takes "BenchmarkPerfScheduling/<case>.r<rep>.<config>/<workload>/..."
// apart; a case name without ".r<rep>." (runs before repetitions) is
// repetition 1.
func splitName(name string) (testCase, workload string, rep int, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 3 {
		return "", "", 0, false
	}
	testCase, workload, rep = parts[1], parts[2], 1
	if f := strings.Split(testCase, "."); len(f) >= 3 && strings.HasPrefix(f[len(f)-2], "r") {
		if n, err := strconv.Atoi(f[len(f)-2][1:]); err == nil && n > 0 {
			testCase, rep = strings.Join(f[:len(f)-2], "."), n
		}
	}
	return testCase, workload, rep, true
}

func load(dir string) (*Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no BenchmarkPerfScheduling_*.json in %s: run `make bench` first", dir)
	}
	sort.Strings(files) // the name ends in a timestamp: the last is the newest
	src := files[len(files)-1]
	raw, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var doc struct {
		DataItems []dataItem `json:"dataItems"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	type key struct {
		testCase, workload string
		rep                int
	}
	runs := map[key]*Run{}
	var order []key
	get := func(name string) *Run {
		c, w, rep, ok := splitName(name)
		if !ok {
			return nil
		}
		k := key{c, w, rep}
		if r, ok := runs[k]; ok {
			return r
		}
		r := &Run{Rep: rep}
		runs[k] = r
		order = append(order, k)
		return r
	}
	put := func(m *map[string]float64, k string, v float64) {
		if *m == nil {
			*m = map[string]float64{}
		}
		(*m)[k] = v
	}
	for _, it := range doc.DataItems {
		r := get(it.Labels["Name"])
		if r == nil || it.Data == nil {
			continue
		}
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			r.Throughput, r.ThroughputMedian = it.Data["Average"], it.Data["Perc50"]
		case "SchedulingDuration":
			r.Duration = it.Data["Duration"]
		case "scheduler_scheduling_attempt_duration_seconds":
			if res := it.Labels["result"]; res != "" {
				put(&r.AttemptP99, res, it.Data["Perc99"])
			}
		case "scheduler_podgroup_scheduling_attempt_duration_seconds":
			if res := it.Labels["result"]; res != "" {
				put(&r.GroupAttemptP99, res, it.Data["Perc99"])
			}
		case "scheduler_plugin_execution_duration_seconds":
			if p, ep := it.Labels["plugin"], it.Labels["extension_point"]; p != "" && ep != "" {
				put(&r.PluginP99, p+"/"+ep, it.Data["Perc99"])
			}
		case "heap_memory_usage":
			r.HeapP50MB, r.HeapMaxMB = it.Data["Perc50"], it.Data["Max"]
		case "sluice_research_claim_duration_seconds":
			r.ClaimSeconds = it.Data["Average"] / 1000 // scheduler_perf reports histograms in ms
		case "sluice_research_claim_victims":
			r.Victims = it.Data["Average"] / 1000 // a count, scaled like a duration
		case "sluice_research_claim_waves":
			r.Waves = it.Data["Average"] / 1000
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "sluice-process-usage.json")); err == nil {
		var us []usage
		if err := json.Unmarshal(data, &us); err != nil {
			return nil, fmt.Errorf("sluice-process-usage.json: %w", err)
		}
		for _, u := range us {
			if r := get(u.Workload); r != nil {
				r.CPUSeconds, r.Pods = u.CPUSeconds, u.Pods
			}
		}
	}
	rep := &Report{Source: src}
	if data, err := os.ReadFile(filepath.Join(dir, "sluice-plugins.json")); err == nil {
		if err := json.Unmarshal(data, &rep.Plugins); err != nil {
			return nil, fmt.Errorf("sluice-plugins.json: %w", err)
		}
	}
	rows := map[string]int{} // index into rep.Rows by "case/base"
	for _, k := range order {
		base, variant := k.workload, "sluice"
		for _, v := range variants() {
			if strings.HasSuffix(k.workload, "_"+v) {
				base, variant = strings.TrimSuffix(k.workload, "_"+v), v
				break
			}
		}
		i, ok := rows[k.testCase+"/"+base]
		if !ok {
			i = len(rep.Rows)
			rows[k.testCase+"/"+base] = i
			rep.Rows = append(rep.Rows, Row{Case: k.testCase, Workload: base})
		}
		row := &rep.Rows[i]
		v := row.variant(variant)
		if v == nil {
			row.Variants = append(row.Variants, Variant{Name: variant})
			v = &row.Variants[len(row.Variants)-1]
		}
		v.Runs = append(v.Runs, *runs[k])
	}
	for i := range rep.Rows {
		rep.Rows[i].sum()
	}
	return rep, nil
}

func (row *Row) variant(name string) *Variant {
	for i := range row.Variants {
		if row.Variants[i].Name == name {
			return &row.Variants[i]
		}
	}
	return nil
}

// sum fills in each variant's summary and sluice's ratios, pairing the
// runs of one repetition.
func (row *Row) sum() {
	for i := range row.Variants {
		v := &row.Variants[i]
		slices.SortFunc(v.Runs, func(a, b Run) int { return a.Rep - b.Rep })
		v.Throughput = stat(collect(v.Runs, func(r Run) float64 { return r.Throughput }))
	}
	s := row.variant("sluice")
	if s == nil {
		return
	}
	ratio := func(base *Variant) Stat {
		var rs []float64
		for _, a := range s.Runs {
			for _, b := range base.Runs {
				if a.Rep == b.Rep && a.Throughput > 0 && b.Throughput > 0 {
					rs = append(rs, a.Throughput/b.Throughput)
				}
			}
		}
		return stat(rs)
	}
	for _, b := range []string{"default", "GangScheduling"} {
		if v := row.variant(b); v != nil {
			if r := ratio(v); r.N > 0 {
				row.Baseline, row.Ratio = b, r
				break
			}
		}
	}
	if c := row.variant("ceiling"); c != nil {
		row.RatioToCeiling = ratio(c)
	}
}

func collect(runs []Run, f func(Run) float64) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
}

func (rep *Report) write(w io.Writer) {
	fmt.Fprintf(w, "Source: %s\n\n", rep.Source)
	fmt.Fprintln(w, "Each figure is the median over the repetitions, with their range in brackets.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | workload | variant | reps | pods/s avg | pods/s p50 | duration s | pod attempt p99 ms: scheduled | unschedulable | pod group attempt p99 ms: scheduled | unschedulable | heap MB p50 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range rep.Rows {
		for _, v := range row.Variants {
			f := func(g func(Run) float64) Stat { return stat(collect(v.Runs, g)) }
			res := func(m func(Run) map[string]float64, k string) Stat {
				return f(func(r Run) float64 { return m(r)[k] })
			}
			pod := func(r Run) map[string]float64 { return r.AttemptP99 }
			group := func(r Run) map[string]float64 { return r.GroupAttemptP99 }
			fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Case, row.Workload, v.Name, len(v.Runs),
				v.Throughput, f(func(r Run) float64 { return r.ThroughputMedian }), f(func(r Run) float64 { return r.Duration }),
				res(pod, "scheduled"), res(pod, "unschedulable"), res(group, "scheduled"), res(group, "unschedulable"),
				f(func(r Run) float64 { return r.HeapP50MB }).format(0))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | workload | sluice / baseline (throughput, per repetition) | sluice / ceiling |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, row := range rep.Rows {
		base := "-"
		if row.Ratio.N > 0 {
			base = fmt.Sprintf("%s vs %s, n=%d", row.Ratio.format(2), row.Baseline, row.Ratio.N)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.Case, row.Workload, base, row.RatioToCeiling.format(2))
	}
	rep.writePlugins(w)
	claims := false
	for _, row := range rep.Rows {
		for _, v := range row.Variants {
			for _, r := range v.Runs {
				if r.ClaimSeconds > 0 || r.Victims > 0 {
					if !claims {
						fmt.Fprintln(w)
						fmt.Fprintln(w, "| research claim | variant | rep | room free after s (claim) | victims | waves |")
						fmt.Fprintln(w, "|---|---|---|---|---|---|")
						claims = true
					}
					fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", row.Workload, v.Name, r.Rep, num(r.ClaimSeconds, 1), num(r.Victims, 0), num(r.Waves, 0))
				}
			}
		}
	}
	fmt.Fprintln(w, "\nEvery variant runs in a scheduler of its own (stock: kube-scheduler's default profile, no out-of-tree plugin registered; sluice: the shipped configuration; ceiling: no Filter or Score plugin), repetitions interleaved in rotated order. Heap is the harness's sampling of the test process (scheduler and kube-apiserver) during the measured phase.")
}

// writePlugins lists sluice's plugins' p99 per extension point under the
// sluice variant of each workload.
func (rep *Report) writePlugins(w io.Writer) {
	header := false
	for _, row := range rep.Rows {
		s := row.variant("sluice")
		if s == nil {
			continue
		}
		keys := map[string]bool{}
		for _, r := range s.Runs {
			for k := range r.PluginP99 {
				if slices.Contains(rep.Plugins, strings.Split(k, "/")[0]) {
					keys[k] = true
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !header {
				fmt.Fprintln(w)
				fmt.Fprintln(w, "| case | workload | sluice plugin / extension point | p99 ms (over the sampled cycles) |")
				fmt.Fprintln(w, "|---|---|---|---|")
				header = true
			}
			st := stat(collect(s.Runs, func(r Run) float64 { return r.PluginP99[k] }))
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.Case, row.Workload, k, st.format(3))
		}
	}
}

func num(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}
