// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"math"
	"strconv"
)

// BarChart draws grouped bars: one group per category, one bar per series
// in each group, e.g. unallocated GPU % per trace (categories) for each
// scheduler (series).
//
//	c := plot.BarChart{
//		Title: "Unallocated GPUs at 100% arrival", YLabel: "%",
//		Categories: []string{"default", "gpushare100"},
//		Series: []plot.Series{
//			{Name: "BestFit", Points: []plot.Point{{Y: 7.14}, {Y: 15.38}}},
//			{Name: "FGD", Points: []plot.Point{{Y: 4.77}, {Y: 13.36}}},
//		},
//	}
type BarChart struct {
	// Title is drawn above the chart and is the document's title.
	Title string
	// YLabel names the value axis.
	YLabel string
	// Categories label the groups along the x axis.
	Categories []string
	// Series are the bars: Points[i].Y is the bar for Categories[i]
	// (X is not used). A missing, NaN or infinite value leaves a gap.
	Series []Series
	// Width and Height are the size in pixels; 0 means 720 x 420.
	Width, Height int
}

// SVG renders the chart as a standalone SVG document. The value axis always
// includes 0, which the bars grow from.
func (c BarChart) SVG() []byte {
	width, height := size(c.Width, c.Height)
	d := newSVG(width, height, c.Title)

	entries := make([]legendEntry, len(c.Series))
	for i, s := range c.Series {
		entries[i] = legendEntry{label: s.Name, color: PaletteColor(i), marker: -1}
	}
	legend := legendWidth(entries, width)
	area := plotArea{left: 70, top: 40, right: width - legend - 24}
	area.right = math.Max(area.right, area.left+1)
	groupWidth := (area.right - area.left) / float64(max(len(c.Categories), 1))

	// Long category labels are turned 35 degrees and cut to 24 characters;
	// the plot gives up the room they need below it.
	widestLabel := 0.0
	for _, category := range c.Categories {
		widestLabel = math.Max(widestLabel, textWidth(truncate(category, 24*fontSize*0.6)))
	}
	slanted := widestLabel > groupWidth-4
	labelRoom := 30.0
	if slanted {
		labelRoom = math.Min(widestLabel*0.6+20, height/3)
		// The first label reaches left of its group by about
		// widestLabel x cos 35°; move the plot right to keep it on the
		// canvas, but never past half the plot's width.
		overhang := widestLabel*0.82 - groupWidth/2 + 8
		area.left = math.Min(math.Max(area.left, overhang), (area.left+area.right)/2)
		groupWidth = (area.right - area.left) / float64(max(len(c.Categories), 1))
	}
	area.bottom = math.Max(height-labelRoom-10, area.top+1)

	lo, hi := 0.0, 0.0
	for _, s := range c.Series {
		for i, p := range s.Points {
			if i < len(c.Categories) && drawable(p.Y) {
				lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
			}
		}
	}
	y := niceAxis(lo, hi, 6, true)
	y.from, y.to = area.bottom, area.top
	drawYAxis(d, area, y, c.YLabel)

	barWidth := groupWidth * 0.8 / float64(max(len(c.Series), 1))
	for i, s := range c.Series {
		for j, p := range s.Points {
			if j >= len(c.Categories) || !drawable(p.Y) {
				continue
			}
			x := area.left + float64(j)*groupWidth + groupWidth*0.1 + float64(i)*barWidth
			top, bottom := y.pixel(math.Max(p.Y, 0)), y.pixel(math.Min(p.Y, 0))
			tooltip := s.Name + ", " + c.Categories[j] + ": " + strconv.FormatFloat(p.Y, 'g', 6, 64)
			d.rect(x, top, math.Max(barWidth-1, 1), bottom-top, PaletteColor(i), tooltip)
		}
	}
	d.line(area.left, y.pixel(0), area.right, y.pixel(0), "#000000", 1)

	for j, category := range c.Categories {
		x := area.left + (float64(j)+0.5)*groupWidth
		label := truncate(category, 24*fontSize*0.6)
		if slanted {
			d.text(x, area.bottom+14, "end", -35, label, category)
		} else {
			d.text(x, area.bottom+18, "middle", 0, label, category)
		}
	}
	drawLegend(d, area.right+16, area.top+8, legend-16, entries)
	return d.bytes()
}
