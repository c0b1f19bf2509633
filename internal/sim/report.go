// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-sched/sluice/internal/plot"
)

// Report collects the results of a simulator run and writes them as CSV,
// a Markdown summary and SVG charts.
type Report struct {
	// Notes are lines printed at the top of the summary (inputs, seeds,
	// rounding of fractional GPUs).
	Notes    []string
	FGD      []FGDResult
	Gangs    map[string][]GangResult // by workload name
	Packing  []PackingResult
	Scenario []ScenarioResult
}

// fgdMetric says what the FGD experiment measures: not the paper's metric,
// so the paper's figures are not printed beside it.
const fgdMetric = "Metric: GPUs no pod was given, as a share of capacity. This is not the FGD paper's " +
	"fragmentation metric: the paper shares GPUs between pods (milli-GPU accounting) and honours each " +
	"pod's gpu_spec (GPU models); Kubernetes extended resources give whole GPUs, so a pod asking for " +
	"part of a GPU gets a whole one here, and gpu_spec is not applied. The paper's figures are " +
	"therefore not comparable and not shown."

// Write writes every file into dir and returns the summary's path.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var md strings.Builder
	md.WriteString("# sluice simulator report\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&md, "- %s\n", n)
	}
	md.WriteString("\n")
	if len(r.FGD) > 0 {
		if err := r.writeFGD(dir, &md); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(r.Gangs))
	for n := range r.Gangs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := r.writeGangs(dir, n, r.Gangs[n], &md); err != nil {
			return "", err
		}
	}
	if len(r.Packing) > 0 {
		if err := r.writePacking(dir, &md); err != nil {
			return "", err
		}
	}
	for _, s := range r.Scenario {
		if err := r.writeScenario(dir, s, &md); err != nil {
			return "", err
		}
	}
	file := filepath.Join(dir, "summary.md")
	return file, os.WriteFile(file, []byte(md.String()), 0o644)
}

func (r *Report) writeFGD(dir string, md *strings.Builder) error {
	rows := [][]string{{"policy", "arrival_pct", "unallocated_gpu_pct", "allocated_gpus", "unschedulable_pods"}}
	chart := plot.LineChart{Title: "Unallocated GPUs vs arrival (openb, FGD method)", XLabel: "requested GPUs, % of capacity", YLabel: "unallocated GPUs, %"}
	md.WriteString("## GPU fragmentation (openb trace, FGD method)\n\n")
	md.WriteString("Unallocated whole GPUs, % of capacity (lower is better), at each arrival level.\n\n| arrival |")
	for _, f := range r.FGD {
		fmt.Fprintf(md, " %s |", f.Policy)
	}
	md.WriteString("\n|---|")
	for range r.FGD {
		md.WriteString("---|")
	}
	md.WriteString("\n")
	levels := map[float64]map[string]float64{}
	var order []float64
	for _, f := range r.FGD {
		s := plot.Series{Name: f.Policy}
		for _, p := range f.Points {
			rows = append(rows, []string{f.Policy, pct(p.Arrival * 100), pct(p.UnallocatedPct), strconv.Itoa(p.AllocatedGPUs), strconv.Itoa(p.Unschedulable)})
			s.Points = append(s.Points, plot.Point{X: p.Arrival * 100, Y: p.UnallocatedPct})
			if levels[p.Arrival] == nil {
				levels[p.Arrival] = map[string]float64{}
				order = append(order, p.Arrival)
			}
			levels[p.Arrival][f.Policy] = p.UnallocatedPct
		}
		chart.Series = append(chart.Series, s)
	}
	sort.Float64s(order)
	for _, a := range order {
		fmt.Fprintf(md, "| %.0f%% |", a*100)
		for _, f := range r.FGD {
			if v, ok := levels[a][f.Policy]; ok {
				fmt.Fprintf(md, " %.2f |", v)
			} else {
				md.WriteString(" – |")
			}
		}
		md.WriteString("\n")
	}
	md.WriteString("\n" + fgdMetric + "\n\n![fgd](fgd.svg)\n\n")
	if err := writeCSV(filepath.Join(dir, "fgd.csv"), rows); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "fgd.svg"), chart.SVG(), 0o644)
}

func (r *Report) writeGangs(dir, name string, results []GangResult, md *strings.Builder) error {
	rows := [][]string{{"policy", "gang", "pods", "gpus_per_pod", "placed", "leaves", "lower_bound_leaves", "nodes", "lower_bound_nodes", "waited_s"}}
	fmt.Fprintf(md, "## Gang placement: %s\n\n", name)
	md.WriteString("| policy | gangs | placed | at leaf lower bound | mean extra leaves | at node lower bound | mean extra nodes | mean wait (sim) |\n|---|---|---|---|---|---|---|---|\n")
	bars := plot.BarChart{Title: "Gangs placed at the lower bound: " + name, YLabel: "% of placed gangs", Categories: []string{"leaves", "nodes"}}
	for _, res := range results {
		s := res.Summary()
		fmt.Fprintf(md, "| %s | %d | %d | %d (%s) | %.2f | %d (%s) | %.2f | %s |\n", res.Policy, s.Gangs, s.Placed,
			s.AtLowerBound, share(s.AtLowerBound, s.Placed), s.MeanExtraLeaves, s.AtNodeBound, share(s.AtNodeBound, s.Placed), s.MeanExtraNodes, s.MeanWait.Round(time.Second))
		bars.Series = append(bars.Series, plot.Series{Name: res.Policy, Points: []plot.Point{
			{X: 0, Y: ratio(s.AtLowerBound, s.Placed)}, {X: 1, Y: ratio(s.AtNodeBound, s.Placed)},
		}})
		for _, g := range res.Gangs {
			rows = append(rows, []string{res.Policy, g.Name, strconv.Itoa(g.Pods), strconv.Itoa(g.GPUsPerPod), strconv.FormatBool(g.Placed),
				strconv.Itoa(g.Leaves), strconv.Itoa(g.LowerBound), strconv.Itoa(g.Nodes), strconv.Itoa(g.LowerBoundNodes), pct(g.Waited.Seconds())})
		}
	}
	md.WriteString("\nBy gang size (single-pod gangs meet every bound by construction, so they are apart):\n\n" +
		"| policy | size | gangs | placed | at leaf lower bound | mean extra leaves | mean wait (sim) | GPU utilisation |\n|---|---|---|---|---|---|---|---|\n")
	for _, res := range results {
		for _, c := range res.BySize() {
			fmt.Fprintf(md, "| %s | %s | %d | %d | %d (%s) | %.2f | %s | %.1f%% |\n", res.Policy, c.Size, c.Gangs, c.Placed,
				c.AtLowerBound, share(c.AtLowerBound, c.Placed), c.MeanExtraLeaves, c.MeanWait.Round(time.Second), 100*res.Utilisation(c.GangSummary))
		}
	}
	md.WriteString("\n")
	for _, res := range results {
		fmt.Fprintf(md, "- %s: GPUs busy %.1f%% of %d GPUs x %s simulated (the makespan); %d times the scheduler gave no outcome within a minute after room freed; %s wall clock\n",
			res.Policy, 100*res.Utilisation(res.Summary()), res.GPUs, res.Makespan.Round(time.Second), res.Undecided, res.Duration.Round(time.Second))
	}
	file := "gangs-" + slug(name)
	fmt.Fprintf(md, "\n![%s](%s.svg)\n\n", name, file)
	if err := writeCSV(filepath.Join(dir, file+".csv"), rows); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file+".svg"), bars.SVG(), 0o644)
}

func (r *Report) writePacking(dir string, md *strings.Builder) error {
	rows := [][]string{{"policy", "pods", "placed", "free_nodes", "nodes", "free_leaves", "leaves", "unallocated_gpu_pct"}}
	md.WriteString("## Inference packing (DLRM services)\n\nWhole nodes and leaf switches left free for training (higher is better).\n\n")
	md.WriteString("| policy | pods placed | free nodes | free leaves | unallocated GPU % |\n|---|---|---|---|---|\n")
	bars := plot.BarChart{Title: "Left whole for training after placing inference", YLabel: "% free", Categories: []string{"nodes", "leaves"}}
	for _, p := range r.Packing {
		fmt.Fprintf(md, "| %s | %d/%d | %d/%d | %d/%d | %.2f |\n", p.Policy, p.Placed, p.Pods, p.FreeNodes, p.Nodes, p.FreeLeaves, p.Leaves, p.UnallocatedPct)
		rows = append(rows, []string{p.Policy, strconv.Itoa(p.Pods), strconv.Itoa(p.Placed), strconv.Itoa(p.FreeNodes), strconv.Itoa(p.Nodes),
			strconv.Itoa(p.FreeLeaves), strconv.Itoa(p.Leaves), pct(p.UnallocatedPct)})
		bars.Series = append(bars.Series, plot.Series{Name: p.Policy, Points: []plot.Point{
			{X: 0, Y: ratio(p.FreeNodes, p.Nodes)}, {X: 1, Y: ratio(p.FreeLeaves, p.Leaves)},
		}})
	}
	md.WriteString("\n![packing](packing.svg)\n\n")
	if err := writeCSV(filepath.Join(dir, "packing.csv"), rows); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "packing.svg"), bars.SVG(), 0o644)
}

func (r *Report) writeScenario(dir string, s ScenarioResult, md *strings.Builder) error {
	rows := [][]string{{"t_s", "production_physical_gpus", "production_overflow_gpus", "research_gpus"}}
	chart := plot.StackedChart{Title: "GPUs by class over time: " + s.Name, XLabel: "time, s", YLabel: "GPUs"}
	phys, over, res := plot.Series{Name: "production, physical"}, plot.Series{Name: "production, overflow"}, plot.Series{Name: "research"}
	for _, x := range s.Samples {
		t := x.T.Seconds()
		rows = append(rows, []string{pct(t), strconv.Itoa(x.ProductionPhysical), strconv.Itoa(x.ProductionOverflow), strconv.Itoa(x.Research)})
		phys.Points = append(phys.Points, plot.Point{X: t, Y: float64(x.ProductionPhysical)})
		over.Points = append(over.Points, plot.Point{X: t, Y: float64(x.ProductionOverflow)})
		res.Points = append(res.Points, plot.Point{X: t, Y: float64(x.Research)})
	}
	chart.Series = []plot.Series{res, phys, over}
	fmt.Fprintf(md, "## Scenario: %s\n\n- evictions to overflow: %d, back to physical: %d\n- production on the overflow node: %.3f GPU-hours\n",
		s.Name, s.Evictions["preemption"], s.Evictions["return"], s.OverflowGPUHours)
	gangs := make([]string, 0, len(s.GangRunning))
	for g := range s.GangRunning {
		gangs = append(gangs, g)
	}
	sort.Strings(gangs)
	for _, g := range gangs {
		fmt.Fprintf(md, "- gang %s running %s after it was submitted, on %d leaves (lower bound %d)\n", g, s.GangRunning[g].Round(100*time.Millisecond),
			s.GangLeaves[g], s.GangLowerBound[g])
	}
	file := "scenario-" + slug(s.Name)
	fmt.Fprintf(md, "\n![%s](%s.svg)\n\n", s.Name, file)
	if err := writeCSV(filepath.Join(dir, file+".csv"), rows); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file+".svg"), chart.SVG(), 0o644)
}

func writeCSV(file string, rows [][]string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func share(a, b int) string { return fmt.Sprintf("%.0f%%", ratio(a, b)) }

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
