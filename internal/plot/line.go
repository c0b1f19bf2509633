// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"math"
	"strconv"
)

// LineChart plots series as lines with a marker at each point, e.g.
// unallocated GPU % against arrival level, one series per scheduler.
//
//	c := plot.LineChart{
//		Title: "openb default", XLabel: "arrived GPUs (% of capacity)", YLabel: "unallocated GPUs (%)",
//		Series: []plot.Series{{Name: "FGD", Points: []plot.Point{{X: 90, Y: 2.1}, {X: 100, Y: 4.8}}}},
//	}
//	svg := c.SVG()
type LineChart struct {
	// Title is drawn above the chart and is the document's title.
	Title string
	// XLabel and YLabel name the axes.
	XLabel, YLabel string
	// Series are the lines, coloured in order from the palette. Points are
	// joined in the order given; a NaN or infinite value breaks the line.
	Series []Series
	// YMin and YMax fix the ends of the y axis; nil means fitted to the
	// data, and so do a NaN or infinite value and a YMin not below YMax.
	// Parts of lines beyond a fixed end are clipped.
	YMin, YMax *float64
	// Width and Height are the size in pixels; 0 means 720 x 420.
	Width, Height int
}

// SVG renders the chart as a standalone SVG document.
func (c LineChart) SVG() []byte {
	width, height := size(c.Width, c.Height)
	d := newSVG(width, height, c.Title)

	entries := make([]legendEntry, len(c.Series))
	for i, s := range c.Series {
		entries[i] = legendEntry{label: s.Name, color: PaletteColor(i), marker: i % markerShapes}
	}
	legend := legendWidth(entries, width)
	area := plotArea{left: 70, top: 40, right: width - legend - 24, bottom: height - 50}
	area.right = math.Max(area.right, area.left+1)
	area.bottom = math.Max(area.bottom, area.top+1)

	x, y := c.axes(area)
	drawYAxis(d, area, y, c.YLabel)
	for i, text := range x.tickLabels() {
		px := x.pixel(x.ticks[i])
		d.line(px, area.bottom, px, area.bottom+4, "#000000", 1)
		d.text(px, area.bottom+18, "middle", 0, text, "")
	}
	d.line(area.left, area.bottom, area.right, area.bottom, "#000000", 1)
	if c.XLabel != "" {
		d.text((area.left+area.right)/2, height-12, "middle", 0, truncate(c.XLabel, area.right-area.left), c.XLabel)
	}

	for i, s := range c.Series {
		color := PaletteColor(i)
		for _, run := range lineRuns(s.Points, y.lo, y.hi) {
			pixels := make([]xy, len(run))
			for j, p := range run {
				pixels[j] = xy{x.pixel(p.X), y.pixel(p.Y)}
			}
			d.polyline(pixels, color)
		}
		for _, p := range s.Points {
			if drawable(p.X) && drawable(p.Y) && p.Y >= y.lo && p.Y <= y.hi {
				tooltip := s.Name + ": (" + strconv.FormatFloat(p.X, 'g', 6, 64) + ", " + strconv.FormatFloat(p.Y, 'g', 6, 64) + ")"
				d.marker(i%markerShapes, xy{x.pixel(p.X), y.pixel(p.Y)}, color, tooltip)
			}
		}
	}
	drawLegend(d, area.right+16, area.top+8, legend-16, entries)
	return d.bytes()
}

// axes fits the x axis to the drawable points and the y axis to them or to
// YMin and YMax.
func (c LineChart) axes(area plotArea) (axis, axis) {
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !drawable(p.X) || !drawable(p.Y) {
				continue
			}
			xlo, xhi = math.Min(xlo, p.X), math.Max(xhi, p.X)
			ylo, yhi = math.Min(ylo, p.Y), math.Max(yhi, p.Y)
		}
	}
	fixedLo := c.YMin != nil && drawable(*c.YMin)
	fixedHi := c.YMax != nil && drawable(*c.YMax)
	if fixedLo && fixedHi && !(*c.YMin < *c.YMax) {
		fixedLo, fixedHi = false, false
	}
	if fixedLo {
		ylo = *c.YMin
	}
	if fixedHi {
		yhi = *c.YMax
	}
	if fixedLo && !fixedHi && !(yhi > ylo) {
		yhi = ylo + 1
	}
	if fixedHi && !fixedLo && !(ylo < yhi) {
		ylo = yhi - 1
	}
	x := niceAxis(xlo, xhi, 8, true)
	x.from, x.to = area.left, area.right
	y := niceAxis(ylo, yhi, 6, !fixedLo && !fixedHi)
	if fixedLo != fixedHi {
		// Round only the free end out to a tick.
		rounded := niceAxis(ylo, yhi, 6, true)
		if fixedLo {
			y = niceAxis(ylo, rounded.hi, 6, false)
		} else {
			y = niceAxis(rounded.lo, yhi, 6, false)
		}
	}
	y.from, y.to = area.bottom, area.top
	return x, y
}

// lineRuns splits points into runs to draw as polylines: a point with a NaN
// or infinite value ends a run, and segments are clipped to [ylo, yhi].
func lineRuns(points []Point, ylo, yhi float64) [][]Point {
	var runs [][]Point
	var run []Point
	flush := func() {
		if len(run) > 1 {
			runs = append(runs, run)
		}
		run = nil
	}
	for i := 1; i <= len(points); i++ {
		if i == len(points) {
			flush()
			break
		}
		a, b := points[i-1], points[i]
		if !drawable(a.X) || !drawable(a.Y) || !drawable(b.X) || !drawable(b.Y) {
			flush()
			continue
		}
		ca, cb, visible := clipY(a, b, ylo, yhi)
		if !visible {
			flush()
			continue
		}
		if len(run) == 0 || run[len(run)-1] != ca {
			flush()
			run = append(run, ca)
		}
		run = append(run, cb)
		if cb != b {
			flush() // the line leaves the plot here
		}
	}
	return runs
}

// clipY clips segment a-b to the band ylo <= y <= yhi, reporting whether
// any of it is inside.
func clipY(a, b Point, ylo, yhi float64) (Point, Point, bool) {
	t0, t1 := 0.0, 1.0
	dy := b.Y - a.Y
	for _, edge := range []struct{ p, q float64 }{{-dy, a.Y - ylo}, {dy, yhi - a.Y}} {
		if edge.p == 0 {
			if edge.q < 0 {
				return a, b, false
			}
			continue
		}
		t := edge.q / edge.p
		if edge.p < 0 {
			t0 = math.Max(t0, t)
		} else {
			t1 = math.Min(t1, t)
		}
	}
	if t0 > t1 {
		return a, b, false
	}
	at := func(t float64) Point {
		switch t {
		case 0:
			return a
		case 1:
			return b
		}
		return Point{a.X + t*(b.X-a.X), a.Y + t*dy}
	}
	return at(t0), at(t1), true
}
