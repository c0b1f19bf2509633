// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wellFormed parses an SVG element as XML and returns its text.
func wellFormed(t *testing.T, svg []byte) string {
	t.Helper()
	if !strings.HasPrefix(string(svg), "<svg") {
		t.Fatalf("not an <svg> element: %.80s", svg)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return text.String()
			}
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
		}
	}
}

func series(name string, ys ...float64) Series {
	s := Series{Name: name}
	for i, y := range ys {
		s.Points = append(s.Points, Point{X: float64(i), Y: y})
	}
	return s
}

// TestCharts: every chart renders a well-formed SVG element with its
// title and every legend label whole (not cut), and values that cannot
// be drawn do not break it.
func TestCharts(t *testing.T) {
	long := "production on the overflow node (external GPUs)"
	for name, c := range map[string]interface{ SVG() []byte }{
		"line":    LineChart{Title: "Line <title>", XLabel: "s", YLabel: "GPUs", Series: []Series{series("research", 1, 2, math.NaN(), 4), series(long, 0, math.Inf(1), 1, 1)}},
		"stacked": StackedChart{Title: "Stacked", XLabel: "s", YLabel: "GPUs", Series: []Series{series("research", 1, 2, 3), series(long, 3, 2, math.NaN())}},
		"bar":     BarChart{Title: "Bars", YLabel: "%", Categories: []string{"leaves", "nodes"}, Series: []Series{series("sluice", 80, 90), series(long, math.NaN(), 70)}},
		"grid":    GridChart{Title: "Grid", Rows: []string{"s1 / l1", "s1 / l2"}, Cells: [][]string{{PaletteColor(0), ""}, {"#dddddd"}}, Legend: []LegendEntry{{Label: long, Color: PaletteColor(0)}}},
	} {
		text := wellFormed(t, c.SVG())
		for _, want := range []string{long, strings.Fields(map[string]string{"line": "Line <title>", "stacked": "Stacked", "bar": "Bars", "grid": "Grid"}[name])[0]} {
			if !strings.Contains(text, want) {
				t.Errorf("%s chart: text lacks %q", name, want)
			}
		}
	}
}

// TestStack: each series' top edge is it plus every series below it;
// what cannot be drawn counts as nothing.
func TestStack(t *testing.T) {
	got := Stack([]Series{series("a", 1, 2, 3), series("b", 4, math.NaN(), 1), series("c", 0, 1, 1)})
	want := [][]Point{{{0, 1}, {1, 2}, {2, 3}}, {{0, 5}, {1, 2}, {2, 4}}, {{0, 5}, {1, 3}, {2, 5}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stack (-want,+got):\n%s", diff)
	}
}

// TestSmall: a day of samples every 2 s in four series stays small enough
// for a report (no markers, no embedded fonts).
func TestSmall(t *testing.T) {
	var ss []Series
	for i := range 4 {
		s := Series{Name: "series"}
		for x := range 43200 / 100 {
			s.Points = append(s.Points, Point{X: float64(x), Y: float64((x * (i + 1)) % 17)})
		}
		ss = append(ss, s)
	}
	if n := len(StackedChart{Title: "GPUs by class", Series: ss}.SVG()); n > 80_000 {
		t.Errorf("a stacked chart of 4 x 432 points is %d bytes", n)
	}
}

func TestPaletteColor(t *testing.T) {
	if PaletteColor(0) != "#0072B2" || PaletteColor(8) != PaletteColor(0) || PaletteColor(-1) != "#F0E442" {
		t.Errorf("palette: %s %s %s", PaletteColor(0), PaletteColor(8), PaletteColor(-1))
	}
}
