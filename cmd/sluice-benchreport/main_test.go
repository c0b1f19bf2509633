// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"strings"
	"testing"
)

// TestLoad reads a real (trimmed) run: one row per workload with its
// variants, sluice's ratio to the default, the claim's figures.
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
	if len(basic.Runs) != 3 || basic.Baseline != "default" {
		t.Fatalf("SchedulingBasic: %d runs, baseline %q; want default, sluice and ceiling", len(basic.Runs), basic.Baseline)
	}
	// sluice / default = 126.1 / 152.2 pods/s.
	if basic.Ratio < 0.82 || basic.Ratio > 0.84 {
		t.Errorf("SchedulingBasic ratio %.3f, want 126.1/152.2 = 0.83", basic.Ratio)
	}
	claim := rows["ResearchClaim"].Runs[0]
	if claim.Victims != 4096 || claim.Waves != 1 || claim.ClaimSeconds < 110 || claim.ClaimSeconds > 112 {
		t.Errorf("ResearchClaim: %+v, want 4096 victims in 1 wave, the gang running after ~110.7 s", claim)
	}
	if err := rep.check(); err != nil {
		t.Errorf("check() on a complete run: %v", err)
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
		for j := range rep.Rows[i].Runs {
			r := &rep.Rows[i].Runs[j]
			if rep.Rows[i].Case == "ResearchClaim" {
				r.Victims = 0
			}
			switch r.Variant {
			case "ceiling":
				r.Throughput, r.Duration = 0, 0
			case "default":
				r.Throughput = 0 // finished before the first throughput sample
			}
		}
	}
	err = rep.check()
	for _, want := range []string{"5000Nodes_10000Pods under ceiling: no pods scheduled", "1000Nodes_512Gang: the claim did not complete (victims 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check() = %v, want it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "under default") {
		t.Errorf("check() = %v, want runs with a duration but no throughput sample accepted", err)
	}
}
