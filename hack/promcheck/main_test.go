// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFindsProblems: an unknown metric, an expression that does not
// parse, an annotation template that does not, and a missing alert are
// each reported.
func TestCheckFindsProblems(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	doc := write("metrics.md", "| `sluice_slurm_failsafe` | gauge | mode | x |\n| `sluice_claim_duration_seconds` | histogram | | x |\n")
	rules := write("rules.yaml", `kind: PrometheusRule
spec:
  groups:
  - name: g
    rules:
    - alert: Known
      expr: max(sluice_slurm_failsafe) > 0 and rate(sluice_claim_duration_seconds_count[5m]) > 0
    - alert: Unknown
      expr: sluice_gangs_waiting > 0
    - alert: Broken
      expr: sum(
    - alert: BadTemplate
      expr: up == 0
      annotations:
        summary: "{{ $labels.job "
`)
	dash := write("dashboard.json", `{"panels":[{"title":"row","panels":[{"title":"p","targets":[{"expr":"rate(sluice_slurm_failsafe[$__rate_interval])"},{"expr":"research_claims_active"}]}]}]}`)
	problems, err := check(doc, rules, dash, []string{"up"}, []string{"Known", "Missing"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{"sluice_gangs_waiting is not a metric", "sum(", "BadTemplate", "no alert Missing", `panel "p", target 1: research_claims_active is not a metric`} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not report %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "Known") || strings.Contains(all, "target 0") {
		t.Errorf("a correct rule or query is reported:\n%s", all)
	}
}
