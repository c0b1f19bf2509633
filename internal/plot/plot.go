// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package plot draws small SVG charts for sluice's reports with nothing but
// the standard library: a LineChart of a metric against load, a BarChart
// comparing schedulers side by side and a GridChart that colours one cell per
// node, e.g. the GPU nodes of a fabric laid out by leaf.
//
// Charts are plain structs; SVG renders one as a standalone SVG document.
// Series take their colours, in order, from a fixed colour-blind-safe palette()
// (PaletteColor) and line series also cycle marker shapes, so they stay
// distinguishable in grey print. All text is escaped for XML. Values that are
// NaN or infinite, or beyond ±1e300, are left out rather than drawn.
package plot

import "math"

// Point is one (X, Y) value of a series.
type Point struct {
	X, Y float64
}

// Series is a named sequence of points. In a LineChart the points are joined
// in the given order; in a BarChart Points[i].Y is the bar of category i and
// X is not used.
type Series struct {
	// Name labels the series in the legend.
	Name string
	// Points are the series' values.
	Points []Point
}

// palette() is the Okabe-Ito colour-blind-safe palette(), ordered so that
// neighbouring series contrast most; yellow, the faintest on white, is last.
func palette() []string {
	return []string{
		"#0072B2", // blue
		"#E69F00", // orange
		"#009E73", // bluish green
		"#D55E00", // vermillion
		"#CC79A7", // reddish purple
		"#56B4E9", // sky blue
		"#000000", // black
		"#F0E442", // yellow
	}
}

// PaletteColor returns the colour of series i, cycling through the eight
// Okabe-Ito colours: 0 is "#0072B2" (blue), 1 "#E69F00" (orange), 8 blue
// again. Use it to colour GridChart cells to match other charts.
func PaletteColor(i int) string {
	n := len(palette())
	return palette()[((i%n)+n)%n]
}

// drawable reports whether v can be placed on an axis. NaN and infinities
// cannot, and neither can values so large that differences between them
// overflow.
func drawable(v float64) bool {
	return !math.IsNaN(v) && math.Abs(v) <= 1e300
}

// Default canvas size of line and bar charts, in pixels.
const (
	defaultWidth  = 720
	defaultHeight = 420
)

// size returns w x h, or the default size for a zero or negative value.
func size(w, h int) (float64, float64) {
	width, height := float64(defaultWidth), float64(defaultHeight)
	if w > 0 {
		width = float64(w)
	}
	if h > 0 {
		height = float64(h)
	}
	return width, height
}
