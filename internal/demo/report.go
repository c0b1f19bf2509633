// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"fmt"
	"html"
	"os"
	"strings"
	"time"

	"github.com/sluice-sched/sluice/internal/plot"
)

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
	gpuChart := plot.LineChart{
		Title: "GPUs by class", XLabel: "seconds", YLabel: "GPUs",
		Series: []plot.Series{
			{Name: "research (physical)", Points: researchS},
			{Name: "production (physical)", Points: prodS},
			{Name: "production (overflow)", Points: overflowS},
			{Name: "free physical", Points: freeS},
		},
	}
	overflowChart := plot.LineChart{Title: "Production pods on the overflow node", XLabel: "seconds", YLabel: "pods",
		Series: []plot.Series{{Name: "pods on " + overflowNode, Points: overflowPods}}}
	readyChart := plot.LineChart{Title: "Production replicas Ready (all Deployments)", XLabel: "seconds", YLabel: "replicas",
		Series: []plot.Series{{Name: "Ready", Points: changes(readyS)}}}
	placement := d.placementChart()

	var b strings.Builder
	status := "passed"
	if storyErr != nil {
		status = "FAILED: " + storyErr.Error()
	}
	fmt.Fprintf(&b, `<!doctype html><html><head><meta charset="utf-8"><title>sluice demo</title>
<style>body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}code{background:#f4f4f4;padding:1px 4px}.fail{color:#b00}</style>
</head><body><h1>sluice demo</h1><p>%s, %s. Status: <b class="%s">%s</b>.</p>
`, html.EscapeString(d.start.UTC().Format(time.RFC3339)), html.EscapeString(fmt.Sprintf("%d nodes x %d GPUs, %d leaves under %d spines", len(d.cluster.nodes), d.opts.GPUsPerNode, d.opts.Spines*d.opts.LeavesPerSpine, d.opts.Spines)),
		map[bool]string{true: "fail", false: ""}[storyErr != nil], html.EscapeString(status))
	b.WriteString("<h2>Steps</h2><table><tr><th>step</th><th>started (s)</th><th>took (s)</th></tr>")
	for _, s := range d.result.steps {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.1f</td><td>%.1f</td></tr>", html.EscapeString(s.name), s.started.Seconds(), s.took.Seconds())
	}
	b.WriteString("</table><h2>Figures</h2><ul>")
	r := d.result
	if r.claimSeconds > 0 {
		fmt.Fprintf(&b, "<li>research claim, make-before-break: %d pods x %d GPUs running %.1f s after submission", r.gangPods, d.opts.GPUsPerNode, r.claimSeconds)
		if r.coldClaimSeconds > 0 {
			fmt.Fprintf(&b, "; the same claim break-before-make, in this run: %.1f s", r.coldClaimSeconds)
		}
		b.WriteString("</li>")
		fmt.Fprintf(&b, "<li>gang placement: %d nodes in %d leaves (%s); lower bound %d leaves</li>", len(r.gangNodes), len(r.gangLeaves), html.EscapeString(strings.Join(r.gangLeaves, ", ")), r.leafLowerBound)
	}
	if r.returnSeconds > 0 {
		fmt.Fprintf(&b, "<li>production back on physical GPUs %.1f s after the gang ended (hysteresis %s); %d pods left on the overflow node", r.returnSeconds, d.opts.ReturnHysteresis, r.onOverflowEnd)
		if r.coldReturnSeconds > 0 {
			fmt.Fprintf(&b, "; after the break-before-make claim: %.1f s", r.coldReturnSeconds)
		}
		b.WriteString("</li>")
	}
	if r.drained != "" {
		fmt.Fprintf(&b, "<li>Slurm drained %s; production GPUs placed on it afterwards: %d</li>", html.EscapeString(r.drained), r.drainedPods)
	}
	if d.inv != nil {
		fmt.Fprintf(&b, "<li>invariants checked at every event (no budget broken, no research or controller-less pod evicted, no production beyond the overflow room, no gang half bound): %d violations; evictions %s</li>",
			len(r.violations), html.EscapeString(fmt.Sprint(r.evictions)))
	}
	fmt.Fprintf(&b, "</ul><h2>Serving during the claims and the returns</h2><p>The first claim is make-before-break (the default): the overflow node starts a warm instance of each victim at the provider (remote start %s) and the victim is evicted once it serves; its replacement adopts it. The second claim, for comparison, is break-before-make: a victim is evicted first and its replacement starts cold. Ready replicas are counted at every pod event; replica-seconds below are the integral of <code>spec.replicas</code> minus Ready replicas over the phase.</p>", d.opts.RemoteStartupDelay)
	b.WriteString("<table><tr><th rowspan=2>Deployment</th><th rowspan=2>replicas</th><th rowspan=2>PDB maxUnavailable</th><th rowspan=2>allowed</th><th colspan=4>make-before-break</th><th colspan=4>break-before-make</th></tr>")
	b.WriteString("<tr><th>min Ready, claim</th><th>replica-s below, claim</th><th>min Ready, return</th><th>replica-s below, return</th><th>min Ready, claim</th><th>replica-s below, claim</th><th>min Ready, return</th><th>replica-s below, return</th></tr>")
	for _, dep := range r.deployments {
		cells := ""
		for _, phase := range []string{phaseClaim, phaseReturn, phaseColdClaim, phaseColdReturn} {
			a, ok := d.obs.availabilityOf(phase, dep.name)
			if !ok {
				cells += "<td>-</td><td>-</td>"
				continue
			}
			cells += fmt.Sprintf("<td>%d</td><td>%.0f</td>", a.minReady, a.belowSeconds)
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%d</td><td>%s</td><td>%d</td>%s</tr>", dep.name, dep.replicas, html.EscapeString(dep.maxUnavailable), dep.allowed, cells)
	}
	b.WriteString("</table><p>The budgets themselves are checked at every eviction (invariants above).</p>")
	b.WriteString("<h2>Production replicas Ready over time</h2><p>Sampled twice a second: the first dip is the make-before-break claim, the second the break-before-make one (see Steps for when each ran).</p>")
	b.Write(readyChart.SVG())
	b.WriteString("<h2>GPUs by class over time</h2>")
	b.Write(gpuChart.SVG())
	b.WriteString("<h2>Overflow pods over time</h2>")
	b.Write(overflowChart.SVG())
	b.WriteString("<h2>The gang on the fabric</h2><p>One row per leaf switch, one cell per node.</p>")
	b.Write(placement.SVG())
	b.WriteString("<h2>Story</h2><pre>")
	for _, l := range d.view.lines {
		b.WriteString(html.EscapeString(l) + "\n")
	}
	b.WriteString("</pre></body></html>\n")
	return os.WriteFile(file, []byte(b.String()), 0o644)
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
