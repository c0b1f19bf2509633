// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import "math"

// LegendEntry is one labelled colour in a GridChart legend.
type LegendEntry struct {
	// Label says what the colour means, e.g. "8 free GPUs".
	Label string
	// Color is a CSS colour, e.g. "#009E73" or PaletteColor(2).
	Color string
}

// GridChart draws a grid of coloured cells with labelled rows and columns,
// e.g. a GPU map: one row per leaf switch, one cell per node, coloured by
// the node's class.
//
//	c := plot.GridChart{
//		Title: "GPU nodes by leaf",
//		Rows:  []string{"P8/S1", "P8/S2"},
//		Cols:  []string{"0", "1", "2"},
//		Cells: [][]string{
//			{plot.PaletteColor(2), plot.PaletteColor(3), ""},
//			{plot.PaletteColor(2), "", ""},
//		},
//		Legend: []plot.LegendEntry{{Label: "free", Color: plot.PaletteColor(2)}, {Label: "full", Color: plot.PaletteColor(3)}},
//	}
type GridChart struct {
	// Title is drawn above the grid and is the document's title.
	Title string
	// Rows label the rows, top to bottom.
	Rows []string
	// Cols label the columns, left to right; may be empty.
	Cols []string
	// Cells[r][c] is the CSS colour of the cell in row r, column c; "" or a
	// missing cell is left blank. Rows may differ in length.
	Cells [][]string
	// Legend explains the colours, drawn below the grid.
	Legend []LegendEntry
	// CellSize is the side of a cell in pixels; 0 means 14.
	CellSize int
}

// SVG renders the chart as a standalone SVG document, sized to fit the
// grid.
func (c GridChart) SVG() []byte {
	cell := 14.0
	if c.CellSize > 0 {
		cell = float64(c.CellSize)
	}
	rows, cols := len(c.Rows), len(c.Cols)
	rows = max(rows, len(c.Cells))
	for _, row := range c.Cells {
		cols = max(cols, len(row))
	}

	const maxLabel = 200.0
	rowLabels := 0.0
	for _, r := range c.Rows {
		rowLabels = math.Max(rowLabels, textWidth(r))
	}
	left := 16 + math.Min(rowLabels, maxLabel)
	colLabels := 0.0
	for _, col := range c.Cols {
		colLabels = math.Max(colLabels, textWidth(col))
	}
	// Column labels stand upright when they are wider than a cell, and only
	// every labelEvery-th one is written when cells are too thin for text.
	upright := colLabels > cell
	labelEvery := max(1, int(math.Ceil((fontSize+2)/cell)))
	top := 40.0
	if cols > 0 && len(c.Cols) > 0 {
		if upright {
			top += math.Min(colLabels, maxLabel/2) + 8
		} else {
			top += fontSize + 8
		}
	}

	width := math.Max(left+float64(cols)*cell+16, 320)
	if c.Title != "" {
		width = math.Max(width, textWidth(c.Title)*16/fontSize+32)
	}
	// The legend wraps into lines as wide as the chart.
	type placed struct{ x, line float64 }
	positions := make([]placed, len(c.Legend))
	x, line := 16.0, 0.0
	for i, e := range c.Legend {
		entryWidth := 20 + math.Min(textWidth(e.Label), width-52) + 16
		if x > 16 && x+entryWidth > width-16 {
			x, line = 16, line+1
		}
		positions[i] = placed{x, line}
		x += entryWidth
	}
	legendTop := top + float64(rows)*cell + 20
	height := legendTop + 10
	if len(c.Legend) > 0 {
		height += (line + 1) * 20
	}

	d := newSVG(width, height, c.Title)
	for r := 0; r < rows; r++ {
		y := top + float64(r)*cell
		label := ""
		if r < len(c.Rows) {
			label = c.Rows[r]
			d.text(left-6, y+cell/2+4, "end", 0, truncate(label, maxLabel), label)
		}
		if r >= len(c.Cells) {
			continue
		}
		for col, color := range c.Cells[r] {
			if color == "" {
				continue
			}
			tooltip := label
			if col < len(c.Cols) {
				tooltip += " / " + c.Cols[col]
			}
			d.rect(left+float64(col)*cell, y, math.Max(cell-1, 1), math.Max(cell-1, 1), color, tooltip)
		}
	}
	for col, label := range c.Cols {
		if col%labelEvery != 0 {
			continue
		}
		cx := left + (float64(col)+0.5)*cell
		if upright {
			d.text(cx+4, top-6, "start", -90, truncate(label, maxLabel/2), label)
		} else {
			d.text(cx, top-6, "middle", 0, label, "")
		}
	}
	for i, e := range c.Legend {
		p := positions[i]
		y := legendTop + p.line*20
		d.rect(p.x, y, 12, 12, e.Color, "")
		d.text(p.x+18, y+10, "start", 0, truncate(e.Label, width-52), e.Label)
	}
	return d.bytes()
}
