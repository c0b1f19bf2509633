// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// exponent matches a number in exponent notation, which SVG attributes
// must not hold.
var exponent = regexp.MustCompile(`[0-9][eE][-+]?[0-9]`)

// checkSVG checks that svg is a well-formed XML <svg> document whose text
// holds every one of texts, with no NaN or infinity anywhere and no number
// in exponent notation in a coordinate attribute.
func checkSVG(t *testing.T, svg []byte, texts ...string) {
	t.Helper()
	for _, bad := range []string{"NaN", "Inf"} {
		if bytes.Contains(svg, []byte(bad)) {
			t.Errorf("SVG contains %q:\n%s", bad, svg)
		}
	}
	decoder := xml.NewDecoder(bytes.NewReader(svg))
	var content strings.Builder
	root := ""
	for {
		token, err := decoder.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := token.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			for _, a := range tok.Attr {
				isColor := a.Name.Local == "fill" || a.Name.Local == "stroke"
				if !isColor && exponent.MatchString(a.Value) {
					t.Errorf("attribute %s=%q of <%s> uses exponent notation", a.Name.Local, a.Value, tok.Name.Local)
				}
			}
		case xml.CharData:
			content.Write(tok)
		}
	}
	if root != "svg" {
		t.Fatalf("root element is %q, want svg", root)
	}
	for _, want := range texts {
		if !strings.Contains(content.String(), want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
}

func ptr(v float64) *float64 { return &v }

func TestLineChartSVG(t *testing.T) {
	fgd := Series{Name: "FGD", Points: []Point{{X: 50, Y: 1.2}, {X: 100, Y: 4.77}, {X: 130, Y: 20}}}
	bestFit := Series{Name: "BestFit", Points: []Point{{X: 50, Y: 2}, {X: 100, Y: 7.14}, {X: 130, Y: 25}}}
	tests := []struct {
		name  string
		chart LineChart
		texts []string
	}{
		{
			name:  "two series",
			chart: LineChart{Title: "openb default", XLabel: "arrival (%)", YLabel: "unallocated GPUs (%)", Series: []Series{fgd, bestFit}},
			texts: []string{"openb default", "arrival (%)", "unallocated GPUs (%)", "FGD", "BestFit", "100"},
		},
		{
			name:  "fixed y range clips the line",
			chart: LineChart{Title: "clipped", Series: []Series{fgd}, YMin: ptr(0), YMax: ptr(10)},
			texts: []string{"clipped", "FGD", "10"},
		},
		{
			name:  "only YMin fixed",
			chart: LineChart{Title: "floor", Series: []Series{fgd}, YMin: ptr(0)},
			texts: []string{"floor", "20"},
		},
		{
			name:  "inverted fixed range falls back to the data",
			chart: LineChart{Title: "inverted", Series: []Series{fgd}, YMin: ptr(10), YMax: ptr(0)},
			texts: []string{"inverted"},
		},
		{
			name:  "NaN fixed range falls back to the data",
			chart: LineChart{Title: "nan range", Series: []Series{fgd}, YMin: ptr(math.NaN()), YMax: ptr(math.Inf(1))},
			texts: []string{"nan range"},
		},
		{
			name: "NaN and infinite points are skipped",
			chart: LineChart{Title: "gaps", Series: []Series{{Name: "holes", Points: []Point{
				{X: 0, Y: 1}, {X: 1, Y: math.NaN()}, {X: 2, Y: 3}, {X: math.Inf(1), Y: 4}, {X: 4, Y: math.Inf(-1)}, {X: 5, Y: 2}, {X: 6, Y: 1e308},
			}}}},
			texts: []string{"gaps", "holes"},
		},
		{
			name:  "only non-finite points",
			chart: LineChart{Title: "all missing", Series: []Series{{Name: "void", Points: []Point{{X: math.NaN(), Y: math.NaN()}, {X: math.Inf(1), Y: math.Inf(-1)}}}}},
			texts: []string{"all missing", "void"},
		},
		{
			name:  "empty series and no series",
			chart: LineChart{Title: "empty", Series: []Series{{Name: "nothing"}}},
			texts: []string{"empty", "nothing"},
		},
		{
			name:  "zero chart",
			chart: LineChart{},
		},
		{
			name:  "one point",
			chart: LineChart{Title: "single", Series: []Series{{Name: "one", Points: []Point{{X: 3, Y: 3}}}}},
			texts: []string{"single", "one"},
		},
		{
			name: "text that needs escaping",
			chart: LineChart{Title: `<b>"Q&A"</b>`, XLabel: "x < y", YLabel: "a & b", Series: []Series{
				{Name: "</svg><script>", Points: []Point{{X: 1, Y: 1}, {X: 2, Y: 2}}},
				{Name: "bad \x01 byte \xff", Points: []Point{{X: 1, Y: 2}}},
			}},
			texts: []string{`<b>"Q&A"</b>`, "x < y", "a & b", "</svg><script>", "bad \ufffd byte \ufffd"},
		},
		{
			name: "nine series reuse the palette",
			chart: LineChart{Title: "many", Series: func() []Series {
				var ss []Series
				for i := range 9 {
					ss = append(ss, Series{Name: "scheduler " + string(rune('A'+i)), Points: []Point{{X: float64(i), Y: float64(i * i)}}})
				}
				return ss
			}()},
			texts: []string{"scheduler A", "scheduler I"},
		},
		{
			name:  "very long series name",
			chart: LineChart{Title: "long", Width: 300, Height: 200, Series: []Series{{Name: strings.Repeat("very long name ", 20), Points: []Point{{X: 1, Y: 1}}}}},
			texts: []string{strings.Repeat("very long name ", 20)},
		},
		{
			name:  "tiny canvas",
			chart: LineChart{Title: "tiny", Width: 10, Height: 10, Series: []Series{fgd}},
			texts: []string{"tiny"},
		},
		{
			name:  "huge and tiny values",
			chart: LineChart{Title: "scale", Series: []Series{{Name: "s", Points: []Point{{X: 1e-9, Y: 3e12}, {X: 2e-9, Y: 5e12}}}}},
			texts: []string{"scale", "T"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSVG(t, tt.chart.SVG(), tt.texts...)
		})
	}
}

func TestLineChartMarksEveryDrawablePoint(t *testing.T) {
	tests := []struct {
		name        string
		chart       LineChart
		wantMarkers int
	}{
		{"three points", LineChart{Series: []Series{{Name: "a", Points: []Point{{1, 1}, {2, 2}, {3, 3}}}}}, 3},
		{"NaN point has no marker", LineChart{Series: []Series{{Name: "a", Points: []Point{{1, 1}, {2, math.NaN()}, {3, 3}}}}}, 2},
		// The point at y = 20 lies above YMax = 10.
		{"point beyond fixed range has no marker", LineChart{YMin: ptr(0), YMax: ptr(10), Series: []Series{{Name: "a", Points: []Point{{1, 1}, {2, 20}, {3, 3}}}}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each marker carries a tooltip naming its series and point.
			if got := strings.Count(string(tt.chart.SVG()), "<title>a: ("); got != tt.wantMarkers {
				t.Fatalf("got %d markers, want %d", got, tt.wantMarkers)
			}
		})
	}
}

func TestBarChartSVG(t *testing.T) {
	traces := []string{"default", "gpushare100", "multigpu50"}
	tests := []struct {
		name  string
		chart BarChart
		texts []string
	}{
		{
			name: "grouped bars",
			chart: BarChart{Title: "Unallocated GPUs at 100% arrival", YLabel: "%", Categories: traces, Series: []Series{
				{Name: "BestFit", Points: []Point{{Y: 7.14}, {Y: 15.38}, {Y: 4.38}}},
				{Name: "FGD", Points: []Point{{Y: 4.77}, {Y: 13.36}, {Y: 2.91}}},
			}},
			texts: []string{"Unallocated GPUs at 100% arrival", "BestFit", "FGD", "default", "gpushare100", "multigpu50"},
		},
		{
			name: "negative, NaN, missing and extra values",
			chart: BarChart{Title: "odd values", Categories: traces, Series: []Series{
				{Name: "neg", Points: []Point{{Y: -3}, {Y: math.NaN()}}},
				{Name: "extra", Points: []Point{{Y: math.Inf(1)}, {Y: 1}, {Y: 2}, {Y: 99}}},
			}},
			texts: []string{"odd values", "neg", "extra"},
		},
		{
			name:  "no categories",
			chart: BarChart{Title: "none", Series: []Series{{Name: "s", Points: []Point{{Y: 1}}}}},
			texts: []string{"none", "s"},
		},
		{
			name:  "zero chart",
			chart: BarChart{},
		},
		{
			name: "long category names slant",
			chart: BarChart{Title: "slanted", Categories: []string{strings.Repeat("category ", 8), "b & c", "<d>"}, Series: []Series{
				{Name: "s", Points: []Point{{Y: 1}, {Y: 2}, {Y: 3}}},
			}},
			texts: []string{strings.Repeat("category ", 8), "b & c", "<d>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSVG(t, tt.chart.SVG(), tt.texts...)
		})
	}
}

func TestBarChartDrawsOneBarPerValue(t *testing.T) {
	chart := BarChart{Categories: []string{"a", "b"}, Series: []Series{
		{Name: "s0", Points: []Point{{Y: 1}, {Y: math.NaN()}}},
		{Name: "s1", Points: []Point{{Y: 2}, {Y: 3}, {Y: 4}}},
	}}
	// s0 has one drawable value; s1 has two within the two categories.
	svg := string(chart.SVG())
	for series, want := range map[string]int{"s0": 1, "s1": 2} {
		if got := strings.Count(svg, "<title>"+series+", "); got != want {
			t.Errorf("%s: got %d bars, want %d", series, got, want)
		}
	}
}

func TestGridChartSVG(t *testing.T) {
	free, full := PaletteColor(2), PaletteColor(3)
	tests := []struct {
		name  string
		chart GridChart
		texts []string
	}{
		{
			name: "GPU map",
			chart: GridChart{
				Title: "GPU nodes by leaf",
				Rows:  []string{"G6/P8/S1", "G6/P8/S2"},
				Cols:  []string{"0", "1", "2"},
				Cells: [][]string{{free, full, ""}, {free}},
				Legend: []LegendEntry{
					{Label: "8 free GPUs", Color: free},
					{Label: "full", Color: full},
				},
			},
			texts: []string{"GPU nodes by leaf", "G6/P8/S1", "G6/P8/S2", "8 free GPUs", "full"},
		},
		{
			name: "ragged cells, more rows than labels, upright column labels",
			chart: GridChart{
				Title: "ragged",
				Rows:  []string{"r0"},
				Cols:  []string{"node-000", "node-001"},
				Cells: [][]string{{free, full, free, full}, {"", free}, nil},
			},
			texts: []string{"ragged", "r0", "node-000"},
		},
		{
			name: "escaped text and colour",
			chart: GridChart{
				Title:  "a<b",
				Rows:   []string{"x&y"},
				Cells:  [][]string{{`red" onload="x`}},
				Legend: []LegendEntry{{Label: "<evil>", Color: `"><script>`}},
			},
			texts: []string{"a<b", "x&y", "<evil>"},
		},
		{
			name: "many legend entries wrap",
			chart: GridChart{Title: "legend", Cells: [][]string{{free}}, Legend: func() []LegendEntry {
				var es []LegendEntry
				for i := range 12 {
					es = append(es, LegendEntry{Label: "class number " + string(rune('a'+i)), Color: PaletteColor(i)})
				}
				return es
			}()},
			texts: []string{"class number a", "class number l"},
		},
		{
			name:  "thin cells label every other column",
			chart: GridChart{Title: "thin", CellSize: 6, Cols: []string{"0", "1", "2", "3"}, Cells: [][]string{{free, free, free, free}}},
			texts: []string{"thin"},
		},
		{
			name:  "zero chart",
			chart: GridChart{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSVG(t, tt.chart.SVG(), tt.texts...)
		})
	}
}

func TestNiceAxis(t *testing.T) {
	tests := []struct {
		name       string
		lo, hi     float64
		maxTicks   int
		round      bool
		wantTicks  []float64
		wantLabels []string
	}{
		// Step (9.6-0.3)/5 = 1.86 rounds up to 2; ends move out to 0 and 10.
		{"rounded out", 0.3, 9.6, 6, true, []float64{0, 2, 4, 6, 8, 10}, []string{"0", "2", "4", "6", "8", "10"}},
		// Same step, ends kept: ticks fall inside.
		{"ends kept", 0.3, 9.6, 6, false, []float64{2, 4, 6, 8}, []string{"2", "4", "6", "8"}},
		// Step 1/5 = 0.2.
		{"fractions", 0, 1, 6, true, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		// Step 50000/5 = 10000, labelled in thousands.
		{"thousands", 0, 50000, 6, true, []float64{0, 10000, 20000, 30000, 40000, 50000}, []string{"0", "10k", "20k", "30k", "40k", "50k"}},
		// Step 3e6/5 = 6e5, rounded up to 1e6.
		{"millions", 0, 3e6, 6, true, []float64{0, 1e6, 2e6, 3e6}, []string{"0", "1M", "2M", "3M"}},
		// Step 2/5 = 0.4, rounded up to 0.5; -1 and 1 are ticks.
		{"negative", -1, 1, 6, true, []float64{-1, -0.5, 0, 0.5, 1}, []string{"-1", "-0.5", "0", "0.5", "1"}},
		// A single value 5 is padded by 1 each side: [4, 6], step 0.5.
		{"one value", 5, 5, 6, true, []float64{4, 4.5, 5, 5.5, 6}, []string{"4", "4.5", "5", "5.5", "6"}},
		// No data: [0, 1].
		{"empty", math.Inf(1), math.Inf(-1), 6, true, []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		// Step 4e-9/5 = 8e-10 rounds up to 1e-9; more than 6 decimals use %g.
		{"tiny", 1e-9, 5e-9, 6, true, []float64{1e-9, 2e-9, 3e-9, 4e-9, 5e-9}, []string{"1e-09", "2e-09", "3e-09", "4e-09", "5e-09"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := niceAxis(tt.lo, tt.hi, tt.maxTicks, tt.round)
			if len(a.ticks) != len(tt.wantTicks) {
				t.Fatalf("ticks %v, want %v", a.ticks, tt.wantTicks)
			}
			for i := range a.ticks {
				if math.Abs(a.ticks[i]-tt.wantTicks[i]) > math.Abs(tt.wantTicks[i])*1e-9 {
					t.Fatalf("ticks %v, want %v", a.ticks, tt.wantTicks)
				}
			}
			if got := a.tickLabels(); !reflect.DeepEqual(got, tt.wantLabels) {
				t.Fatalf("labels %q, want %q", got, tt.wantLabels)
			}
		})
	}
}

func TestLineRuns(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name     string
		points   []Point
		ylo, yhi float64
		want     [][]Point
	}{
		{"all inside", []Point{{0, 1}, {1, 2}, {2, 3}}, 0, 10, [][]Point{{{0, 1}, {1, 2}, {2, 3}}}},
		{"NaN splits", []Point{{0, 1}, {1, 2}, {2, nan}, {3, 3}, {4, 4}}, 0, 10, [][]Point{{{0, 1}, {1, 2}}, {{3, 3}, {4, 4}}}},
		{"lone points make no run", []Point{{0, 1}, {1, nan}, {2, 3}}, 0, 10, nil},
		// From (0,5) to (2,15) the line leaves y = 10 at x = 1, and comes
		// back from (2,15) to (4,5) at x = 3.
		{"clipped above", []Point{{0, 5}, {2, 15}, {4, 5}}, 0, 10, [][]Point{{{0, 5}, {1, 10}}, {{3, 10}, {4, 5}}}},
		{"all outside", []Point{{0, 20}, {1, 30}}, 0, 10, nil},
		{"no points", nil, 0, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lineRuns(tt.points, tt.ylo, tt.yhi); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPaletteColor(t *testing.T) {
	tests := []struct {
		name  string
		index int
		want  string
	}{
		{"first", 0, "#0072B2"},
		{"second", 1, "#E69F00"},
		{"wraps after eight", 8, "#0072B2"},
		{"negative wraps", -1, "#F0E442"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PaletteColor(tt.index); got != tt.want {
				t.Fatalf("PaletteColor(%d) = %s, want %s", tt.index, got, tt.want)
			}
		})
	}
}
