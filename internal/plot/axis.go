// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"math"
	"strconv"
	"strings"
)

// axis is a linear scale from data values [lo, hi] to pixels [from, to],
// with round tick values inside it.
type axis struct {
	lo, hi   float64
	from, to float64
	ticks    []float64
	step     float64
}

// pixel maps a data value to its pixel position.
func (a axis) pixel(v float64) float64 {
	return a.from + (v-a.lo)/(a.hi-a.lo)*(a.to-a.from)
}

// niceAxis returns an axis covering [lo, hi] with at most about maxTicks
// round ticks (1, 2 or 5 times a power of ten). When round is true the ends
// move out to the nearest ticks, so [0.3, 9.6] becomes [0, 10] with ticks
// 0, 2, 4, 6, 8, 10; otherwise the ends stay and ticks fall inside them.
// Empty or inverted ranges are widened so that the axis is never degenerate.
func niceAxis(lo, hi float64, maxTicks int, round bool) axis {
	switch {
	case !drawable(lo) || !drawable(hi) || lo > hi:
		lo, hi = 0, 1
	case lo == hi:
		// One value: centre it in a unit-sized window, or a tenth of its
		// size for large values.
		pad := math.Max(1, math.Abs(lo)/10)
		lo, hi = lo-pad, hi+pad
	}
	step := niceStep((hi - lo) / float64(max(maxTicks-1, 1)))
	if round {
		lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	}
	a := axis{lo: lo, hi: hi, step: step}
	first := math.Ceil(lo/step - 1e-9)
	for i := 0; i <= 2*maxTicks; i++ {
		v := (first + float64(i)) * step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0 // not -0 or 1e-17 from rounding
		}
		a.ticks = append(a.ticks, v)
	}
	return a
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	magnitude := math.Pow(10, math.Floor(math.Log10(raw)))
	switch fraction := raw / magnitude; {
	case fraction <= 1:
		return magnitude
	case fraction <= 2:
		return 2 * magnitude
	case fraction <= 5:
		return 5 * magnitude
	default:
		return 10 * magnitude
	}
}

// tickLabels formats the axis' ticks with no more decimals than its step
// needs and, for large values, an SI suffix: 0, 0.5, 1; 0, 20k, 40k; 1.5M.
func (a axis) tickLabels() []string {
	largest := math.Max(math.Abs(a.lo), math.Abs(a.hi))
	unit, suffix := 1.0, ""
	for _, si := range []struct {
		unit   float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e4, "k"}} {
		if largest >= si.unit {
			unit, suffix = si.unit, si.suffix
			if si.suffix == "k" {
				unit = 1e3
			}
			break
		}
	}
	decimals := max(0, int(math.Ceil(-math.Log10(a.step/unit)-1e-9)))
	scale := math.Pow(10, float64(decimals))
	labels := make([]string, len(a.ticks))
	for i, v := range a.ticks {
		var s string
		if decimals > 6 || largest/unit >= 1e6 {
			s = strconv.FormatFloat(v/unit, 'g', 4, 64)
		} else {
			// Rounded to the step's decimals, then written shortest:
			// 0.6000000000000001 is "0.6", 1.0 is "1".
			s = strconv.FormatFloat(math.Round(v/unit*scale)/scale, 'f', -1, 64)
		}
		if strings.Trim(s, "-0.") == "" {
			labels[i] = "0"
			continue
		}
		labels[i] = s + suffix
	}
	return labels
}

// plotArea is the rectangle the data is drawn in, in pixels.
type plotArea struct {
	left, top, right, bottom float64
}

// drawYAxis draws the y axis at the left of area with its tick labels,
// light grid lines across the area and label, rotated, beside it.
func drawYAxis(d *svgDoc, area plotArea, y axis, label string) {
	for i, text := range y.tickLabels() {
		py := y.pixel(y.ticks[i])
		d.line(area.left, py, area.right, py, "#e0e0e0", 1)
		d.text(area.left-6, py+4, "end", 0, text, "")
	}
	d.line(area.left, area.top, area.left, area.bottom, "#000000", 1)
	if label != "" {
		x, mid := 16.0, (area.top+area.bottom)/2
		d.text(x, mid, "middle", -90, truncate(label, area.bottom-area.top), label)
	}
}

// legendEntry is one line of a chart legend.
type legendEntry struct {
	label string
	color string
	// marker is the marker shape to draw on a line swatch, or -1 for a
	// filled square swatch.
	marker int
}

// legendWidth is the width the legend needs beside the plot, capped at a
// third of the chart's width.
func legendWidth(entries []legendEntry, chartWidth float64) float64 {
	if len(entries) == 0 {
		return 0
	}
	widest := 0.0
	for _, e := range entries {
		widest = math.Max(widest, textWidth(e.label))
	}
	return math.Min(widest+44, chartWidth/3)
}

// drawLegend writes entries in a column starting at (x, y), each label cut
// to fit width.
func drawLegend(d *svgDoc, x, y, width float64, entries []legendEntry) {
	for i, e := range entries {
		cy := y + float64(i)*20
		if e.marker < 0 {
			d.rect(x+4, cy-6, 12, 12, e.color, "")
		} else {
			d.line(x, cy, x+20, cy, e.color, 2)
			d.marker(e.marker, xy{x + 10, cy}, e.color, "")
		}
		d.text(x+28, cy+4, "start", 0, truncate(e.label, width-28), e.label)
	}
}
