// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-sched/sluice/internal/benchfmt"
)

// TestLoad reads a real (trimmed) run from before repetitions: one row per
// workload with its variants, each one repetition, sluice's ratio to the
// default, the claim's figures.
func TestLoad(t *testing.T) {
	rep, err := load("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range rep.Rows {
		rows[r.Case] = r
	}
	basic := rows["SchedulingBasic"]
	if len(basic.Variants) != 3 || basic.Baseline != "default" {
		t.Fatalf("SchedulingBasic: %d variants, baseline %q; want default, sluice and ceiling", len(basic.Variants), basic.Baseline)
	}
	// sluice / default = 126.1 / 152.2 pods/s.
	if basic.Ratio.N != 1 || basic.Ratio.Median < 0.82 || basic.Ratio.Median > 0.84 {
		t.Errorf("SchedulingBasic ratio %+v, want one repetition of 126.1/152.2 = 0.83", basic.Ratio)
	}
	checkBeforeServing(t, rep)
}

// checkBeforeServing checks a run recorded before the bench measured
// production's serving (sluice-availability.json): complete but for those
// figures.
func checkBeforeServing(t *testing.T, rep *Report) {
	t.Helper()
	err := rep.check()
	if err == nil {
		t.Fatal("check() passed a run without serving figures")
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		// The run also predates the claim's other variants.
		if !strings.Contains(line, "no serving figures") && !strings.Contains(line, "no run under breakBeforeMake") && !strings.Contains(line, "no run under default") {
			t.Errorf("check() on a run complete but for the serving figures: %s", line)
		}
	}
}

// TestRepetitions reads a real run of two repetitions: each variant holds
// both, in order, with the median and range of its figures, and sluice's
// own plugins are the ones named by the bench.
func TestRepetitions(t *testing.T) {
	rep, err := load("testdata/smoke-reps")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want SchedulingBasic, GPUPods, TopologyAwareGangs and ResearchClaim", len(rep.Rows))
	}
	basic := rep.Rows[0]
	if basic.Case != "SchedulingBasic" || len(basic.Variants) != 3 {
		t.Fatalf("first row %s with %d variants, want SchedulingBasic with default, sluice, ceiling", basic.Case, len(basic.Variants))
	}
	for _, v := range basic.Variants {
		if len(v.Runs) != 2 || v.Runs[0].Rep != 1 || v.Runs[1].Rep != 2 {
			t.Errorf("%s: runs %+v, want repetitions 1 and 2", v.Name, v.Runs)
		}
		heap := stat(collect(v.Runs, func(r Run) float64 { return r.HeapP50MB }))
		if heap.N != 2 || heap.Min <= 0 || heap.Min > heap.Median || heap.Median > heap.Max {
			t.Errorf("%s: heap %+v, want two samples, min <= median <= max", v.Name, heap)
		}
	}
	claim := rep.Rows[3].variant("sluice")
	if claim == nil || len(claim.Runs) != 2 {
		t.Fatalf("ResearchClaim: %+v, want two repetitions", claim)
	}
	if claim.Runs[0].AttemptP99["scheduled"] <= claim.Runs[0].AttemptP99["unschedulable"] {
		t.Errorf("ResearchClaim attempt p99 by result %v: the scheduled gang pods wait for the claim, want them slower than the unschedulable attempts", claim.Runs[0].AttemptP99)
	}
	var out strings.Builder
	rep.write(&out)
	for _, want := range []string{"| GPUPods | smoke | InferencePacking/PreScore |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "NodeResourcesFit/") {
		t.Errorf("report lists an upstream plugin among sluice's:\n%s", out.String())
	}
	checkBeforeServing(t, rep)
}

// TestAttemptP99ByResult: a pod group's unschedulable attempts do not
// replace its scheduled ones (the report used to keep whichever result came
// last), and pod groups and pods are apart.
func TestAttemptP99ByResult(t *testing.T) {
	dir := t.TempDir()
	doc := `{"dataItems":[
{"data":{"Perc99":60},"unit":"ms","labels":{"Metric":"scheduler_podgroup_scheduling_attempt_duration_seconds","Name":"BenchmarkPerfScheduling/TopologyAwareGangs.r1.sluice/750_sluice/ns","result":"scheduled"}},
{"data":{"Perc99":4000},"unit":"ms","labels":{"Metric":"scheduler_podgroup_scheduling_attempt_duration_seconds","Name":"BenchmarkPerfScheduling/TopologyAwareGangs.r1.sluice/750_sluice/ns","result":"unschedulable"}},
{"data":{"Perc99":7},"unit":"ms","labels":{"Metric":"scheduler_scheduling_attempt_duration_seconds","Name":"BenchmarkPerfScheduling/TopologyAwareGangs.r1.sluice/750_sluice/ns","result":"scheduled"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "BenchmarkPerfScheduling_x.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Rows[0].Variants[0].Runs[0]
	if r.GroupAttemptP99["scheduled"] != 60 || r.GroupAttemptP99["unschedulable"] != 4000 || r.AttemptP99["scheduled"] != 7 {
		t.Errorf("pod group p99 %v, pod p99 %v; want groups scheduled 60 and unschedulable 4000, pods scheduled 7", r.GroupAttemptP99, r.AttemptP99)
	}
}

// TestRatioPerRepetition: sluice's ratio pairs each repetition with the
// baseline's own, not medians with medians.
func TestRatioPerRepetition(t *testing.T) {
	row := Row{Variants: []Variant{
		{Name: "default", Runs: []Run{{Rep: 1, Throughput: 100}, {Rep: 2, Throughput: 50}, {Rep: 3, Throughput: 80}}},
		{Name: "sluice", Runs: []Run{{Rep: 2, Throughput: 55}, {Rep: 1, Throughput: 90}, {Rep: 3, Throughput: 80}}},
	}}
	row.sum()
	// 90/100, 55/50, 80/80
	if row.Baseline != "default" || row.Ratio.N != 3 || row.Ratio.Median != 1.0 || row.Ratio.Min != 0.9 || row.Ratio.Max != 1.1 {
		t.Errorf("ratio %+v vs %s, want median 1.0 over 0.9-1.1 vs default", row.Ratio, row.Baseline)
	}
	if s := row.variant("sluice"); s.Runs[0].Rep != 1 || s.Throughput.Median != 80 {
		t.Errorf("sluice: %+v, want runs in repetition order and a median of 80 pods/s", s)
	}
}

// TestCheck: a run that scheduled nothing, or whose claim did not
// complete, fails the smoke check, saying which; a run too short for a
// throughput sample but with a scheduling duration passes.
func TestCheck(t *testing.T) {
	rep, err := load("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Rows {
		for j := range rep.Rows[i].Variants {
			v := &rep.Rows[i].Variants[j]
			for k := range v.Runs {
				r := &v.Runs[k]
				switch v.Name {
				case "ceiling":
					r.Throughput, r.Duration = 0, 0
				case "default":
					r.Throughput = 0 // finished before the first throughput sample
				}
			}
		}
	}
	err = rep.check()
	if want := "5000Nodes_10000Pods under ceiling, repetition 1: no pods scheduled"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check() = %v, want it to contain %q", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "under default, repetition") {
		t.Errorf("check() = %v, want runs with a duration but no throughput sample accepted", err)
	}

	// A claim that evicted nothing did not happen.
	claims, err := load("testdata/claim-reps")
	if err != nil {
		t.Fatal(err)
	}
	claims.Rows[0].variant("sluice").Runs[1].Serving.Victims = 0
	if err, want := claims.check(), "smoke, repetition 2: the claim did not complete (victims 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check() = %v, want it to contain %q", err, want)
	}

	// A claim that left production without a node or broke a PDB under
	// sluice failed; the baseline's do not count.
	if claims, err = load("testdata/claim-reps"); err != nil {
		t.Fatal(err)
	}
	claims.Rows[0].variant("sluice").Runs[2].Serving.Unplaced = 2
	claims.Rows[0].variant("sluice").Runs[0].Serving.BelowPDB = 1
	err = claims.check()
	for _, want := range []string{
		"smoke, repetition 3: the claim broke what sluice promises: 2 production pods without a node",
		"smoke, repetition 1: the claim broke what sluice promises: 0 production pods without a node when the gang ran, 1 Deployments below",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check() = %v, want it to contain %q", err, want)
		}
	}

	// A claim measured against nothing is not measured.
	if claims, err = load("testdata/claim-reps"); err != nil {
		t.Fatal(err)
	}
	claims.Rows[0].Variants = claims.Rows[0].Variants[:1]
	if claims.Rows[0].Variants[0].Name != "sluice" {
		t.Fatalf("first variant %s, want sluice", claims.Rows[0].Variants[0].Name)
	}
	err = claims.check()
	for _, want := range []string{"smoke: no run under breakBeforeMake", "smoke: no run under default"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check() = %v, want it to contain %q", err, want)
		}
	}
}

// TestBenchmarksDoc: docs/benchmarks.md shows the newest results committed
// under docs/bench, exactly as the report renders them.
func TestBenchmarksDoc(t *testing.T) {
	if err := syncDoc("../../docs/benchmarks.md", "../../docs/bench", false); err != nil {
		t.Fatal(err)
	}
}

// TestSyncDoc: a doc whose block differs from the results fails the check
// and names the command that fixes it; -write fixes it.
func TestSyncDoc(t *testing.T) {
	dir := t.TempDir()
	rep, err := load("testdata/smoke-reps")
	if err != nil {
		t.Fatal(err)
	}
	rep.Run = &benchfmt.RunInfo{Commit: "abc", Date: "2026-12-01T21:00:00Z", CPUs: 2, MemoryGiB: 24, Go: "go1.26.8", Kernel: "6.1", Args: []string{"-sluice-reps=2"}}
	results := filepath.Join(dir, "results")
	file, err := rep.save(results)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(file) != "20261201T210000Z-abc.json" {
		t.Errorf("saved as %s, want 20261201T210000Z-abc.json", filepath.Base(file))
	}
	doc := filepath.Join(dir, "doc.md")
	stale := "# Bench\n\n" + docBegin + "old; do not edit -->\nold table\n" + docEnd + "\n\nAfter.\n"
	if err := os.WriteFile(doc, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syncDoc(doc, results, false); err == nil || !strings.Contains(err.Error(), "make bench-doc") {
		t.Fatalf("check of a stale doc = %v, want an error naming make bench-doc", err)
	}
	if err := syncDoc(doc, results, true); err != nil {
		t.Fatal(err)
	}
	if err := syncDoc(doc, results, false); err != nil {
		t.Fatalf("check after -write: %v", err)
	}
	// Written by make from the top (docs/...), checked by go test from
	// the package (../../docs/...): the block does not depend on how the
	// paths were spelled.
	t.Chdir(dir)
	if err := syncDoc("doc.md", "results", false); err != nil {
		t.Fatalf("check from another directory: %v", err)
	}
	text, _ := os.ReadFile(doc)
	for _, want := range []string{"Measured 2026-12-01T21:00:00Z at abc on 2 cores", "| ResearchClaim | smoke | sluice | 2 |", "\n\nAfter.\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("written doc lacks %q:\n%s", want, text)
		}
	}
}

// TestServing reads a real ResearchClaim run of three repetitions with
// make-before-break on (sluice), off (breakBeforeMake) and the upstream
// baseline (default): each run carries the claim and what production kept
// serving, the report lists the median and range per variant and
// Deployment, and the smoke check fails a run without them, naming it.
func TestServing(t *testing.T) {
	rep, err := load("testdata/claim-reps")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || len(rep.Rows[0].Variants) != 3 {
		t.Fatalf("rows %+v, want one ResearchClaim row with sluice, breakBeforeMake and default", rep.Rows)
	}
	for _, v := range rep.Rows[0].Variants {
		for _, r := range v.Runs {
			if r.Serving == nil || len(r.Serving.Deployments) != 4 || r.Serving.ClaimSeconds <= 0 || r.Serving.Victims != 32 {
				t.Errorf("%s repetition %d: serving %+v, want the claim, 32 victims and 4 Deployments", v.Name, r.Rep, r.Serving)
			}
		}
	}
	var out strings.Builder
	rep.write(&out)
	// sluice's claims: 9.9, 10.6 and 14.7 s in 15, 14 and 12 waves; prod-0's
	// fewest Ready 14, 15, 15 against the 14 its PDB keeps. The baseline
	// deletes the same 32 pods in no wave, leaves all 32 without a node and
	// all four Deployments below their PDB (prod-0 down to 8, 7, 6).
	for _, want := range []string{
		"| smoke | sluice | 3 | 5 (5-5) | 10.6 (9.9-14.7) | 13.5 (13.4-17.2) | 32 (32-32) | 14 (12-15) | 0 (0-0) | 0 (0-0) | prod-0 | 16 | 14 | 15 (14-15) |",
		"| smoke | breakBeforeMake | 3 | 5 (5-5) | 35.6 (34.4-35.6) |",
		"| smoke | default | 3 | 0 (0-0) | 1.5 (1.4-1.7) | 0.3 (0.3-0.4) | 32 (32-32) | 0 (0-0) | 32 (32-32) | 4 (4-4) | prod-0 | 16 | 14 | 7 (6-8) |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if err := rep.check(); err != nil {
		t.Errorf("check() on a complete run: %v", err)
	}
	rep.Rows[0].variant("breakBeforeMake").Runs[1].Serving = nil
	if err := rep.check(); err == nil || !strings.Contains(err.Error(), "smoke under breakBeforeMake, repetition 2: no serving figures") {
		t.Errorf("check() without one run's figures = %v, want it named", err)
	}
}
