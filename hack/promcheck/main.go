// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command promcheck checks sluice's alerts and dashboard with Prometheus'
// own parsers: the PrometheusRule's groups must pass the rule-file
// validation Prometheus applies when it loads them (expressions, `for`,
// label and annotation templates), every expression of the rules and of
// the dashboard must parse, and every metric they name must be one the
// binaries register (docs/metrics.md, generated from them by
// TestMetricNames) or one of the allowed others (kube-scheduler's, up). It
// is a module of its own so that Prometheus' dependencies stay out of
// sluice's.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

func main() {
	metricsDoc := flag.String("metrics", "docs/metrics.md", "the generated list of metrics the binaries register")
	rules := flag.String("rules", "manifests/monitoring/prometheusrules.yaml", "the PrometheusRule")
	dashboard := flag.String("dashboard", "manifests/monitoring/dashboard.json", "the Grafana dashboard")
	allow := flag.String("allow", "up,scheduler_pending_pods,scheduler_schedule_attempts_total", "other metrics the queries may name")
	require := flag.String("require-alerts", "", "alerts the rules must define, comma separated")
	flag.Parse()
	problems, err := check(*metricsDoc, *rules, *dashboard, strings.Split(*allow, ","), splitNonEmpty(*require))
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "promcheck:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("promcheck: %s and %s name only registered metrics and parse\n", *rules, *dashboard)
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

var row = regexp.MustCompile("^\\| `([a-z_:][a-z0-9_:]*)` \\| ([a-z]+)")

// known reads the metric names (with their histogram series) from the
// generated doc.
func known(doc string, allow []string) (map[string]bool, error) {
	f, err := os.Open(doc)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	for _, a := range allow {
		out[a] = true
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n++
		out[m[1]] = true
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m[1]+s] = true
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s lists no metrics", doc)
	}
	return out, sc.Err()
}

func check(doc, rulesFile, dashboardFile string, allow, require []string) ([]string, error) {
	names, err := known(doc, allow)
	if err != nil {
		return nil, err
	}
	p := parser.NewParser(parser.Options{})
	var problems []string
	uses := func(where, expr string) {
		e, err := p.ParseExpr(expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q does not parse: %v", where, expr, err))
			return
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && !names[vs.Name] {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric the binaries register (%s)", where, vs.Name, doc))
			}
			return nil
		})
	}

	// The PrometheusRule: its spec is a rule file.
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", rulesFile, err)
	}
	if obj.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: kind %q, want PrometheusRule", rulesFile, obj.Kind)
	}
	spec, err := yaml.Marshal(&obj.Spec)
	if err != nil {
		return nil, err
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, p, nil)
	for _, e := range errs {
		problems = append(problems, fmt.Sprintf("%s: %v", rulesFile, e))
	}
	var alerts []string
	if groups != nil {
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				alerts = append(alerts, r.Alert)
				uses(fmt.Sprintf("%s: group %s, rule %s", rulesFile, g.Name, name), r.Expr)
			}
		}
	}
	for _, a := range require {
		if !slices.Contains(alerts, a) {
			problems = append(problems, fmt.Sprintf("%s: no alert %s", rulesFile, a))
		}
	}

	// The dashboard: every target's expression, Grafana's variables given
	// a value.
	data, err = os.ReadFile(dashboardFile)
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", dashboardFile, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
	count := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, pn := range ps {
			for i, t := range pn.Targets {
				count++
				uses(fmt.Sprintf("%s: panel %q, target %d", dashboardFile, pn.Title, i), vars.Replace(t.Expr))
			}
			walk(pn.Panels)
		}
	}
	walk(dash.Panels)
	if count == 0 {
		problems = append(problems, dashboardFile+": no queries")
	}
	return problems, nil
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}
