// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-benchreport turns one `make bench` run (scheduler_perf's
// JSON and test/bench's process-usage JSON) into the comparison table:
// every workload under the default kube-scheduler profile, under sluice's
// and under the ceiling profile, with sluice's ratio to the default.
//
//	sluice-benchreport -dir _output/bench -json _output/bench/report.json
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
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
		for _, run := range row.Runs {
			if (run.Throughput <= 0 && run.Duration <= 0) || run.Pods == 0 {
				errs = append(errs, fmt.Errorf("%s under %s: no pods scheduled (throughput %.1f, duration %.1fs, %d pods)", row.Workload, run.Variant, run.Throughput, run.Duration, run.Pods))
			}
			if row.Case == "ResearchClaim" && run.Variant == "sluice" {
				claims++
				if run.Victims < 1 || run.Waves < 1 || run.ClaimSeconds <= 0 {
					errs = append(errs, fmt.Errorf("%s: the claim did not complete (victims %.0f, waves %.0f, room free after %.1fs)", row.Workload, run.Victims, run.Waves, run.ClaimSeconds))
				}
			}
		}
	}
	if claims == 0 {
		errs = append(errs, errors.New("no ResearchClaim run under sluice"))
	}
	return errors.Join(errs...)
}

// Run is one workload under one profile.
type Run struct {
	// Variant is the profile or upstream plugin set: default, sluice,
	// ceiling, GangScheduling, TopologyPlacement.
	Variant string `json:"variant"`
	// Throughput is scheduler_perf's SchedulingThroughput in pods/s
	// (average and median of its one-second samples).
	Throughput       float64 `json:"throughputAvg"`
	ThroughputMedian float64 `json:"throughputP50"`
	// Duration is the measured pods' scheduling duration in seconds.
	Duration float64 `json:"durationSeconds"`
	// AttemptP99 is the 99th percentile of one pod's (or pod group's)
	// scheduling attempt, in milliseconds.
	AttemptP99 float64 `json:"attemptP99Ms"`
	// CPUPer1000 is the test process's CPU seconds (scheduler and
	// apiserver together, node and pod creation included) per 1,000 pods
	// the workload created; RSS its peak.
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPer1000 float64 `json:"cpuSecondsPer1000Pods"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	Pods       int     `json:"pods"`
	// Claim figures (ResearchClaim only).
	ClaimSeconds float64 `json:"claimSeconds,omitempty"`
	Victims      float64 `json:"victims,omitempty"`
	Waves        float64 `json:"waves,omitempty"`
}

// Row is one workload shape with all its variants().
type Row struct {
	Case     string `json:"case"`
	Workload string `json:"workload"`
	Runs     []Run  `json:"runs"`
	// Ratio is sluice's throughput over the baseline's (default, or
	// GangScheduling for gangs), and over the ceiling's.
	Baseline       string  `json:"baseline,omitempty"`
	Ratio          float64 `json:"sluiceOverBaseline,omitempty"`
	RatioToCeiling float64 `json:"sluiceOverCeiling,omitempty"`
}

// Report is the whole run.
type Report struct {
	Source    string `json:"source"`
	Rows      []Row  `json:"rows"`
	Reference []Ref  `json:"upstreamReference"`
}

// Ref is one upstream figure on a machine of this kind.
type Ref struct {
	Workload   string  `json:"workload"`
	Throughput float64 `json:"throughputPodsPerSecond"`
}

// reference() is upstream v1.37.2's scheduler_perf on 2 cores with the whole
// stack co-located (medians), as given in the benchmark's issue.
func reference() []Ref {
	return []Ref{
		{"SchedulingBasic 5,000 nodes / 10,000 pods", 170},
		{"extended resource, 5,000 nodes", 48},
		{"GangScheduling 5,000 nodes / 1,000 gangs", 123},
		{"TopologyAwareScheduling 5,000 nodes / 750 gangs", 27},
		{"PreemptionAsync 5,000 nodes", 55},
	}
}

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

type usage struct {
	Workload   string  `json:"workload"`
	CPUSeconds float64 `json:"cpuSeconds"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	Pods       int     `json:"pods"`
}

// variants() are the workload-name suffixes that name a profile.
func variants() []string {
	return []string{"default", "GangScheduling", "TopologyPlacement", "sluice", "ceiling"}
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
	runs := map[string]*Run{} // by "Case/workload"
	order := []string{}
	get := func(name string) *Run {
		if r, ok := runs[name]; ok {
			return r
		}
		r := &Run{}
		runs[name] = r
		order = append(order, name)
		return r
	}
	for _, it := range doc.DataItems {
		// Name: BenchmarkPerfScheduling/<case>/<workload>/<namespace>
		parts := strings.Split(it.Labels["Name"], "/")
		if len(parts) < 3 || it.Data == nil {
			continue
		}
		r := get(parts[1] + "/" + parts[2])
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			r.Throughput, r.ThroughputMedian = it.Data["Average"], it.Data["Perc50"]
		case "SchedulingDuration":
			r.Duration = it.Data["Duration"]
		case "scheduler_scheduling_attempt_duration_seconds":
			if it.Labels["result"] == "scheduled" && r.AttemptP99 == 0 {
				r.AttemptP99 = it.Data["Perc99"]
			}
		case "scheduler_podgroup_scheduling_attempt_duration_seconds":
			r.AttemptP99 = it.Data["Perc99"]
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
			parts := strings.Split(u.Workload, "/")
			if len(parts) < 3 {
				continue
			}
			r := get(parts[1] + "/" + parts[2])
			r.CPUSeconds, r.MaxRSSMiB, r.Pods = u.CPUSeconds, u.MaxRSSMiB, u.Pods
			if u.Pods > 0 {
				r.CPUPer1000 = u.CPUSeconds / float64(u.Pods) * 1000
			}
		}
	}
	rep := &Report{Source: src, Reference: reference()}
	rows := map[string]int{} // index into rep.Rows by "Case/base"
	for _, name := range order {
		testCase, workload, _ := strings.Cut(name, "/")
		base, variant := workload, "sluice"
		for _, v := range variants() {
			if strings.HasSuffix(workload, "_"+v) {
				base, variant = strings.TrimSuffix(workload, "_"+v), v
				break
			}
		}
		key := testCase + "/" + base
		i, ok := rows[key]
		if !ok {
			i = len(rep.Rows)
			rows[key] = i
			rep.Rows = append(rep.Rows, Row{Case: testCase, Workload: base})
		}
		row := &rep.Rows[i]
		r := *runs[name]
		r.Variant = variant
		row.Runs = append(row.Runs, r)
	}
	for i := range rep.Rows {
		rep.Rows[i].ratios()
	}
	return rep, nil
}

func (row *Row) run(variant string) *Run {
	for i := range row.Runs {
		if row.Runs[i].Variant == variant {
			return &row.Runs[i]
		}
	}
	return nil
}

func (row *Row) ratios() {
	s := row.run("sluice")
	if s == nil || s.Throughput == 0 {
		return
	}
	for _, b := range []string{"default", "GangScheduling"} {
		if r := row.run(b); r != nil && r.Throughput > 0 {
			row.Baseline, row.Ratio = b, s.Throughput/r.Throughput
			break
		}
	}
	if c := row.run("ceiling"); c != nil && c.Throughput > 0 {
		row.RatioToCeiling = s.Throughput / c.Throughput
	}
}

func (rep *Report) write(w io.Writer) {
	fmt.Fprintf(w, "Source: %s\n\n", rep.Source)
	fmt.Fprintln(w, "| case | workload | profile | pods/s avg | pods/s p50 | duration s | attempt p99 ms | CPU s / 1k pods | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, row := range rep.Rows {
		for _, r := range row.Runs {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Case, row.Workload, r.Variant,
				num(r.Throughput, 1), num(r.ThroughputMedian, 1), num(r.Duration, 1), num(r.AttemptP99, 1), num(r.CPUPer1000, 2), num(r.MaxRSSMiB, 0))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| case | workload | sluice / baseline (throughput) | sluice / ceiling |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, row := range rep.Rows {
		base := "-"
		if row.Ratio > 0 {
			base = fmt.Sprintf("%.2f (vs %s)", row.Ratio, row.Baseline)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.Case, row.Workload, base, num(row.RatioToCeiling, 2))
	}
	claims := false
	for _, row := range rep.Rows {
		for _, r := range row.Runs {
			if r.ClaimSeconds > 0 || r.Victims > 0 {
				if !claims {
					fmt.Fprintln(w)
					fmt.Fprintln(w, "| research claim | profile | room free after s (claim) | victims | waves |")
					fmt.Fprintln(w, "|---|---|---|---|---|")
					claims = true
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.Workload, r.Variant, num(r.ClaimSeconds, 1), num(r.Victims, 0), num(r.Waves, 0))
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Upstream reference() (v1.37.2 scheduler_perf, 2 cores, whole stack co-located, medians):")
	for _, ref := range rep.Reference {
		fmt.Fprintf(w, "- %s: %.0f pods/s\n", ref.Workload, ref.Throughput)
	}
	fmt.Fprintln(w, "\nCPU and peak RSS are the whole test process (kube-apiserver and scheduler in one process; etcd apart), measured per workload (the RSS high-water mark is reset before each).")
}

func num(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}
