// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"fmt"
	"html/template"
	"os"
	"strings"
	"time"

	"github.com/sluice-sched/sluice/internal/plot"
)

// reportPage is the demo's HTML report. Charts are SVG elements drawn by
// internal/plot; everything else is escaped by html/template.
const reportPage = `<!doctype html><html><head><meta charset="utf-8"><title>sluice demo</title>
<style>body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}code{background:#f4f4f4;padding:1px 4px}.fail{color:#b00}svg{max-width:100%;height:auto}</style>
</head><body><h1>sluice demo</h1><p>{{.Start}}, {{.Cluster}}. Status: <b class="{{if .Failed}}fail{{end}}">{{.Status}}</b>.</p>
<h2>Steps</h2><table><tr><th>step</th><th>started (s)</th><th>took (s)</th></tr>
{{range .Steps}}<tr><td>{{.Name}}</td><td>{{printf "%.1f" .Started}}</td><td>{{printf "%.1f" .Took}}</td></tr>
{{end}}</table>
<h2>Figures</h2><ul>{{range .Figures}}<li>{{.}}</li>{{end}}</ul>
<h2>Serving during the claims and the returns</h2><p>The first claim is make-before-break (the default): the overflow node starts a warm instance of each victim at the provider (remote start {{.RemoteStart}}) and the victim is evicted once it serves; its replacement adopts it. The second claim, for comparison, is break-before-make: a victim is evicted first and its replacement starts cold. Ready replicas are counted at every pod event; replica-seconds below are the integral of <code>spec.replicas</code> minus Ready replicas over the phase.</p>
<table><tr><th rowspan=2>Deployment</th><th rowspan=2>replicas</th><th rowspan=2>PDB maxUnavailable</th><th rowspan=2>allowed</th><th colspan=4>make-before-break</th><th colspan=4>break-before-make</th></tr>
<tr><th>min Ready, claim</th><th>replica-s below, claim</th><th>min Ready, return</th><th>replica-s below, return</th><th>min Ready, claim</th><th>replica-s below, claim</th><th>min Ready, return</th><th>replica-s below, return</th></tr>
{{range .Deployments}}<tr><td>{{.Name}}</td><td>{{.Replicas}}</td><td>{{.MaxUnavailable}}</td><td>{{.Allowed}}</td>{{range .Phases}}<td>{{.MinReady}}</td><td>{{.Below}}</td>{{end}}</tr>
{{end}}</table><p>The budgets themselves are checked at every eviction (invariants above).</p>
<h2>GPUs by class over time</h2><p>Stacked: research and production on physical GPUs, the free physical GPUs above them (together, every physical GPU), and production on the overflow node on top.</p>
{{.GPUChart}}
<h2>Production replicas Ready over time</h2><p>Sampled twice a second: the first dip is the make-before-break claim, the second the break-before-make one (see Steps for when each ran).</p>
{{.ReadyChart}}
<h2>Overflow pods over time</h2>
{{.OverflowChart}}
<h2>The gang on the fabric</h2><p>One row per leaf switch, one cell per node.</p>
{{.Placement}}
<h2>Story</h2><pre>{{range .Story}}{{.}}
{{end}}</pre></body></html>
`

type reportStep struct {
	Name          string
	Started, Took float64
}

type reportPhase struct{ MinReady, Below string }

type reportDeployment struct {
	Name, MaxUnavailable string
	Replicas, Allowed    int
	Phases               []reportPhase
}

type reportData struct {
	Start, Cluster, Status, RemoteStart            string
	Failed                                         bool
	Steps                                          []reportStep
	Figures                                        []string
	Deployments                                    []reportDeployment
	GPUChart, ReadyChart, OverflowChart, Placement template.HTML
	Story                                          []string
}

// writeReport writes a self-contained HTML page: what happened, the
// charts (GPUs by class over time, overflow pods over time, the gang on the
// fabric) and the figures.
func writeReport(file string, d *demo, storyErr error) error {
	samples := d.obs.samples()
	var researchS, prodS, overflowS, freeS, overflowPods, readyS []plot.Point
	total := float64(len(d.cluster.nodes) * d.opts.GPUsPerNode)
	for _, s := range samples {
		x := s.at.Seconds()
		researchS = append(researchS, plot.Point{X: x, Y: float64(s.research)})
		prodS = append(prodS, plot.Point{X: x, Y: float64(s.production)})
		overflowS = append(overflowS, plot.Point{X: x, Y: float64(s.overflow)})
		freeS = append(freeS, plot.Point{X: x, Y: total - float64(s.research+s.production)})
		overflowPods = append(overflowPods, plot.Point{X: x, Y: float64(s.overflowPods)})
		readyS = append(readyS, plot.Point{X: x, Y: float64(s.productionReady)})
	}
	gpuChart := plot.StackedChart{
		Title: "GPUs by class", XLabel: "seconds", YLabel: "GPUs",
		Series: []plot.Series{
			{Name: "research (physical)", Points: researchS},
			{Name: "production (physical)", Points: prodS},
			{Name: "free physical", Points: freeS},
			{Name: "production (overflow node)", Points: overflowS},
		},
	}
	overflowChart := plot.LineChart{Title: "Production pods on the overflow node", XLabel: "seconds", YLabel: "pods",
		Series: []plot.Series{{Name: "pods on " + overflowNode, Points: changes(overflowPods)}}}
	readyChart := plot.LineChart{Title: "Production replicas Ready (all Deployments)", XLabel: "seconds", YLabel: "replicas",
		Series: []plot.Series{{Name: "Ready", Points: changes(readyS)}}}

	data := reportData{
		Start:       d.start.UTC().Format(time.RFC3339),
		Cluster:     fmt.Sprintf("%d nodes x %d GPUs, %d leaves under %d spines", len(d.cluster.nodes), d.opts.GPUsPerNode, d.opts.Spines*d.opts.LeavesPerSpine, d.opts.Spines),
		Status:      "passed",
		RemoteStart: d.opts.RemoteStartupDelay.String(),
		// The charts are SVG that internal/plot drew (its text escaped
		// by its SVG writer), not user input.
		GPUChart: template.HTML(gpuChart.SVG()), ReadyChart: template.HTML(readyChart.SVG()), //nolint:gosec // see above
		OverflowChart: template.HTML(overflowChart.SVG()), Placement: template.HTML(d.placementChart().SVG()), //nolint:gosec // see above
		Story: d.view.lines,
	}
	if storyErr != nil {
		data.Status, data.Failed = "FAILED: "+storyErr.Error(), true
	}
	for _, s := range d.result.steps {
		data.Steps = append(data.Steps, reportStep{Name: s.name, Started: s.started.Seconds(), Took: s.took.Seconds()})
	}
	r := d.result
	if r.claimSeconds > 0 {
		f := fmt.Sprintf("research claim, make-before-break: %d pods x %d GPUs running %.1f s after submission", r.gangPods, d.opts.GPUsPerNode, r.claimSeconds)
		if r.coldClaimSeconds > 0 {
			f += fmt.Sprintf("; the same claim break-before-make, in this run: %.1f s", r.coldClaimSeconds)
		}
		data.Figures = append(data.Figures, f,
			fmt.Sprintf("gang placement: %d nodes in %d leaves (%s); lower bound %d leaves", len(r.gangNodes), len(r.gangLeaves), strings.Join(r.gangLeaves, ", "), r.leafLowerBound))
	}
	if r.returnSeconds > 0 {
		f := fmt.Sprintf("production back on physical GPUs %.1f s after the gang ended (hysteresis %s); %d pods left on the overflow node", r.returnSeconds, d.opts.ReturnHysteresis, r.onOverflowEnd)
		if r.coldReturnSeconds > 0 {
			f += fmt.Sprintf("; after the break-before-make claim: %.1f s", r.coldReturnSeconds)
		}
		data.Figures = append(data.Figures, f)
	}
	if r.drained != "" {
		data.Figures = append(data.Figures, fmt.Sprintf("Slurm drained %s; production GPUs placed on it afterwards: %d", r.drained, r.drainedPods))
	}
	if d.inv != nil {
		data.Figures = append(data.Figures, fmt.Sprintf("invariants checked at every event (no budget broken, no research or controller-less pod evicted, no production beyond the overflow room, no gang half bound): %d violations; evictions %v",
			len(r.violations), r.evictions))
	}
	for _, dep := range r.deployments {
		row := reportDeployment{Name: dep.name, Replicas: dep.replicas, MaxUnavailable: dep.maxUnavailable, Allowed: dep.allowed}
		for _, phase := range []string{phaseClaim, phaseReturn, phaseColdClaim, phaseColdReturn} {
			a, ok := d.obs.availabilityOf(phase, dep.name)
			if !ok {
				row.Phases = append(row.Phases, reportPhase{"-", "-"})
				continue
			}
			row.Phases = append(row.Phases, reportPhase{fmt.Sprint(a.minReady), fmt.Sprintf("%.0f", a.belowSeconds)})
		}
		data.Deployments = append(data.Deployments, row)
	}
	page, err := template.New("report").Parse(reportPage)
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := page.Execute(f, data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return f.Close()
}

// changes keeps the points where a series changes (and its ends): the
// same line, without a marker every half second.
func changes(points []plot.Point) []plot.Point {
	var out []plot.Point
	for i, p := range points {
		if i == 0 || i == len(points)-1 || p.Y != points[i-1].Y || p.Y != points[i+1].Y {
			out = append(out, p)
		}
	}
	return out
}

// placementChart colours each node by what ran there while the gang ran.
func (d *demo) placementChart() plot.GridChart {
	gang := map[string]bool{}
	for _, n := range d.result.gangNodes {
		gang[n] = true
	}
	var rows []string
	var cells [][]string
	row := -1
	leaf := ""
	for _, n := range d.cluster.nodes {
		if n.leaf != leaf {
			leaf = n.leaf
			rows = append(rows, n.spine+" / "+n.leaf)
			cells = append(cells, nil)
			row++
		}
		color := "#dddddd"
		if gang[n.name] {
			color = plot.PaletteColor(0)
		}
		cells[row] = append(cells[row], color)
	}
	return plot.GridChart{
		Title: "Nodes running the research gang", Rows: rows, Cells: cells, CellSize: 22,
		Legend: []plot.LegendEntry{{Label: "gang pod", Color: plot.PaletteColor(0)}, {Label: "no gang pod", Color: "#dddddd"}},
	}
}
