// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package plot draws the SVG charts of sluice's reports with gonum's plot
// library (gonum.org/v1/plot: maintained, pure Go, SVG through its vgsvg
// canvas, fonts referenced rather than embedded): a LineChart of metrics
// over time or load, a StackedChart of parts of a whole over time (GPUs by
// class), a BarChart comparing policies side by side and a GridChart that
// colours one cell per node, e.g. the nodes of a fabric laid out by leaf.
//
// Charts are plain structs; SVG renders one as an SVG element to inline in
// HTML. Series take their colours, in order, from a colour-blind-safe
// palette (PaletteColor). Values that are NaN or infinite are left out
// rather than drawn; a line breaks there.
package plot

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

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

// palette is the Okabe-Ito colour-blind-safe palette, ordered so that
// neighbouring series contrast most; yellow, the faintest on white, is last.
func palette() []string {
	return []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"}
}

// PaletteColor returns the colour of series i, cycling through the eight
// Okabe-Ito colours: 0 is "#0072B2" (blue), 1 "#E69F00" (orange), 8 blue
// again. Use it to colour GridChart cells to match other charts.
func PaletteColor(i int) string {
	n := len(palette())
	return palette()[((i%n)+n)%n]
}

// rgb parses a "#rrggbb" colour; anything else is grey.
func rgb(s string) color.Color {
	if len(s) == 7 && s[0] == '#' {
		if v, err := strconv.ParseUint(s[1:], 16, 32); err == nil {
			return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
		}
	}
	return color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
}

func drawable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Default canvas size of line, stacked and bar charts, in pixels.
const (
	defaultWidth  = 720
	defaultHeight = 420
)

// px is a length in CSS pixels (96 per inch).
func px(v float64) vg.Length { return vg.Length(v) * vg.Inch / 96 }

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := newBarePlot(title, xLabel, yLabel)
	p.Add(plotter.NewGrid())
	return p
}

// newBarePlot is a plot without grid lines.
func newBarePlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xLabel, yLabel
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// render draws p on an SVG canvas of w x h pixels (0: the default) and
// returns the <svg> element, without the XML prolog, to inline in HTML.
func render(p *plot.Plot, w, h int) []byte {
	width, height := float64(defaultWidth), float64(defaultHeight)
	if w > 0 {
		width = float64(w)
	}
	if h > 0 {
		height = float64(h)
	}
	c := vgsvg.New(px(width), px(height))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return []byte(fmt.Sprintf("<p>chart %q could not be drawn: %v</p>", p.Title.Text, err))
	}
	out := buf.Bytes()
	if i := bytes.Index(out, []byte("<svg")); i > 0 {
		out = out[i:]
	}
	return out
}

// runs splits points into the runs between values that cannot be drawn.
func runs(points []Point) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, p := range points {
		if !drawable(p.X) || !drawable(p.Y) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, plotter.XY{X: p.X, Y: p.Y})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// LineChart draws one line per series.
type LineChart struct {
	// Title is drawn above the chart.
	Title string
	// XLabel and YLabel name the axes.
	XLabel, YLabel string
	// Series are the lines, coloured in order from the palette.
	Series []Series
	// YMin and YMax fix the ends of the y axis; nil means fitted to the
	// data. Lines beyond a fixed end are clipped.
	YMin, YMax *float64
	// Width and Height are the size in pixels; 0 means 720 x 420.
	Width, Height int
}

// SVG renders the chart as an SVG element.
func (c LineChart) SVG() []byte { return render(c.build()) }

func (c LineChart) build() (*plot.Plot, int, int) {
	p := newPlot(c.Title, c.XLabel, c.YLabel)
	for i, s := range c.Series {
		style := draw.LineStyle{Color: rgb(PaletteColor(i)), Width: vg.Points(1.5)}
		for j, xys := range runs(s.Points) {
			l, err := plotter.NewLine(xys)
			if err != nil {
				continue
			}
			l.LineStyle = style
			p.Add(l)
			if j == 0 {
				p.Legend.Add(s.Name, l)
			}
		}
	}
	if c.YMin != nil && drawable(*c.YMin) {
		p.Y.Min = *c.YMin
	}
	if c.YMax != nil && drawable(*c.YMax) && *c.YMax > p.Y.Min {
		p.Y.Max = *c.YMax
	}
	return p, c.Width, c.Height
}

// StackedChart draws parts of a whole over time as stacked areas: the
// first series at the bottom, each next one on top of those below, so the
// top edge is their sum. Every series must have the same X values in the
// same order (samples taken together); a point that cannot be drawn
// counts as 0.
type StackedChart struct {
	// Title is drawn above the chart.
	Title string
	// XLabel and YLabel name the axes.
	XLabel, YLabel string
	// Series are the parts, bottom first, coloured from the palette.
	Series []Series
	// Width and Height are the size in pixels; 0 means 720 x 420.
	Width, Height int
}

// Stack returns, for each series, its top edge: the sum of it and every
// series before it, at each X of the first series.
func Stack(series []Series) [][]Point {
	if len(series) == 0 {
		return nil
	}
	out := make([][]Point, len(series))
	sum := make([]float64, len(series[0].Points))
	for i, s := range series {
		out[i] = make([]Point, len(sum))
		for j := range sum {
			if j < len(s.Points) && drawable(s.Points[j].Y) {
				sum[j] += s.Points[j].Y
			}
			out[i][j] = Point{X: series[0].Points[j].X, Y: sum[j]}
		}
	}
	return out
}

// SVG renders the chart as an SVG element. The y axis starts at 0.
func (c StackedChart) SVG() []byte { return render(c.build()) }

func (c StackedChart) build() (*plot.Plot, int, int) {
	p := newPlot(c.Title, c.XLabel, c.YLabel)
	p.Legend.Left = false
	tops := Stack(c.Series)
	// The highest edge first: each area below is drawn over the one above,
	// leaving every band its own colour. The legend lists them top first,
	// as they are stacked.
	for i := len(tops) - 1; i >= 0; i-- {
		xys := runs(tops[i])
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys[0])
		if err != nil {
			continue
		}
		l.FillColor = rgb(PaletteColor(i))
		l.LineStyle = draw.LineStyle{Color: rgb(PaletteColor(i)), Width: vg.Points(0.5)}
		p.Add(l)
		p.Legend.Add(c.Series[i].Name, l)
	}
	p.Y.Min = 0
	headroom(p, len(c.Series))
	return p, c.Width, c.Height
}

// headroom raises the top of the y axis so that a legend of n entries at
// the top of the plot does not cover the data.
func headroom(p *plot.Plot, n int) {
	if p.Y.Max > p.Y.Min {
		p.Y.Max += (p.Y.Max - p.Y.Min) * (0.06*float64(n) + 0.04)
	}
}

// BarChart draws groups of bars, one group per category, one bar per
// series in each.
type BarChart struct {
	// Title is drawn above the chart.
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

// SVG renders the chart as an SVG element. The value axis includes 0,
// which the bars grow from.
func (c BarChart) SVG() []byte { return render(c.build()) }

func (c BarChart) build() (*plot.Plot, int, int) {
	p := newPlot(c.Title, "", c.YLabel)
	p.Legend.Left = false
	n := max(len(c.Series), 1)
	width := px(480 / float64(max(len(c.Categories), 1)*n))
	for i, s := range c.Series {
		legend := false
		for j := range c.Categories {
			if j >= len(s.Points) || !drawable(s.Points[j].Y) {
				continue
			}
			b, err := plotter.NewBarChart(plotter.Values{s.Points[j].Y}, width)
			if err != nil {
				continue
			}
			b.XMin = float64(j)
			b.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
			b.Color = rgb(PaletteColor(i))
			b.LineStyle.Width = 0
			p.Add(b)
			if !legend {
				p.Legend.Add(s.Name, b)
				legend = true
			}
		}
	}
	p.NominalX(c.Categories...)
	p.X.Min, p.X.Max = -0.5, float64(len(c.Categories))-0.5
	p.Y.Min = math.Min(p.Y.Min, 0)
	headroom(p, len(c.Series))
	return p, c.Width, c.Height
}

// LegendEntry is one labelled colour in a GridChart legend.
type LegendEntry struct {
	// Label says what the colour means, e.g. "8 free GPUs".
	Label string
	// Color is a "#rrggbb" colour, e.g. PaletteColor(2).
	Color string
}

// GridChart draws a grid of coloured cells with labelled rows, e.g. a GPU
// map: one row per leaf switch, one cell per node.
type GridChart struct {
	// Title is drawn above the grid.
	Title string
	// Rows label the rows, top to bottom.
	Rows []string
	// Cols label the columns, left to right; may be empty.
	Cols []string
	// Cells[r][c] is the "#rrggbb" colour of the cell in row r, column c;
	// "" or a missing cell is left blank. Rows may differ in length.
	Cells [][]string
	// Legend explains the colours.
	Legend []LegendEntry
	// CellSize is the side of a cell in pixels; 0 means 14.
	CellSize int
}

// cells is a GridChart's cells as a gonum plotter: unit squares centred
// on (column, row from the bottom).
type cells struct{ c GridChart }

func (g cells) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	n := len(g.c.Cells)
	for r, row := range g.c.Cells {
		y := float64(n - 1 - r)
		for col, colour := range row {
			if colour == "" {
				continue
			}
			x := float64(col)
			rect := vg.Rectangle{Min: vg.Point{X: trX(x - 0.42), Y: trY(y - 0.42)}, Max: vg.Point{X: trX(x + 0.42), Y: trY(y + 0.42)}}
			c.SetColor(rgb(colour))
			c.Fill(rect.Path())
		}
	}
}

func (g cells) DataRange() (xmin, xmax, ymin, ymax float64) {
	cols := 0
	for _, row := range g.c.Cells {
		cols = max(cols, len(row))
	}
	return -0.5, float64(max(cols, 1)) - 0.5, -0.5, float64(max(len(g.c.Cells), 1)) - 0.5
}

// swatchThumb is a legend thumbnail of one colour.
type swatchThumb struct{ c color.Color }

func (s swatchThumb) Thumbnail(c *draw.Canvas) {
	c.SetColor(s.c)
	c.Fill(c.Rectangle.Path())
}

// SVG renders the grid as an SVG element sized to fit it.
func (c GridChart) SVG() []byte { return render(c.build()) }

func (c GridChart) build() (*plot.Plot, int, int) {
	size := c.CellSize
	if size <= 0 {
		size = 14
	}
	cols := 0
	for _, row := range c.Cells {
		cols = max(cols, len(row))
	}
	p := newBarePlot(c.Title, "", "")
	p.Legend.Left = false
	p.Add(cells{c})
	rows := make([]string, len(c.Rows))
	for i, r := range c.Rows {
		rows[len(c.Rows)-1-i] = r
	}
	p.NominalY(rows...)
	if len(c.Cols) > 0 {
		p.NominalX(c.Cols...)
	} else {
		p.HideX()
	}
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	for _, e := range c.Legend {
		p.Legend.Add(e.Label, swatchThumb{rgb(e.Color)})
	}
	// Square cells: the axes span as many cells as the canvas holds
	// (about 90 px go to the row labels, 60 to the title and margins).
	width := max(90+cols*size+20, 360)
	height := 60 + (len(c.Cells)+len(c.Legend))*size
	p.X.Min, p.X.Max = -0.5, -0.5+float64(width-110)/float64(size)
	p.Y.Min, p.Y.Max = -0.5, float64(max(len(c.Cells), 1))-0.5+float64(len(c.Legend))
	return p, width, height
}
