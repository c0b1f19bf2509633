// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fontSize is the size of all text but the title, in pixels.
const fontSize = 12

// textWidth estimates the rendered width of s at fontSize in a sans-serif
// font; the average glyph is about 0.6 em wide.
func textWidth(s string) float64 {
	return float64(utf8.RuneCountInString(s)) * fontSize * 0.6
}

// truncate shortens s to at most width pixels, ending it with "…" when cut.
func truncate(s string, width float64) string {
	maxRunes := int(width / (fontSize * 0.6))
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	if maxRunes < 2 {
		return "…"
	}
	return string([]rune(s)[:maxRunes-1]) + "…"
}

// escape returns s as XML character data or attribute text. Characters that
// XML cannot hold (control characters, invalid UTF-8) become U+FFFD.
func escape(s string) string {
	var b strings.Builder
	// A strings.Builder never fails to write.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// num formats a coordinate. Callers only pass finite values; a non-finite
// one is written as 0 so that the document stays valid.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// svgDoc accumulates one SVG document.
type svgDoc struct {
	buf bytes.Buffer
}

// newSVG starts a width x height document titled title, on white.
func newSVG(width, height float64, title string) *svgDoc {
	d := &svgDoc{}
	fmt.Fprintf(&d.buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="%d" role="img" aria-label="%s">`+"\n",
		num(width), num(height), num(width), num(height), fontSize, escape(title))
	fmt.Fprintf(&d.buf, "<title>%s</title>\n", escape(title))
	fmt.Fprintf(&d.buf, `<rect width="%s" height="%s" fill="#ffffff"/>`+"\n", num(width), num(height))
	if title != "" {
		fmt.Fprintf(&d.buf, `<text x="%s" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", num(width/2), escape(title))
	}
	return d
}

// bytes ends the document and returns it.
func (d *svgDoc) bytes() []byte {
	d.buf.WriteString("</svg>\n")
	return d.buf.Bytes()
}

// text writes s at (x, y), anchored "start", "middle" or "end", rotated by
// rotate degrees about (x, y). When s is cut short full, if different, is
// kept as a tooltip.
func (d *svgDoc) text(x, y float64, anchor string, rotate float64, s, full string) {
	fmt.Fprintf(&d.buf, `<text x="%s" y="%s" text-anchor="%s"`, num(x), num(y), anchor)
	if rotate != 0 {
		fmt.Fprintf(&d.buf, ` transform="rotate(%s %s %s)"`, num(rotate), num(x), num(y))
	}
	d.buf.WriteString(">")
	if full != "" && full != s {
		fmt.Fprintf(&d.buf, "<title>%s</title>", escape(full))
	}
	fmt.Fprintf(&d.buf, "%s</text>\n", escape(s))
}

// line writes a straight line.
func (d *svgDoc) line(x1, y1, x2, y2 float64, stroke string, width float64) {
	fmt.Fprintf(&d.buf, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`+"\n",
		num(x1), num(y1), num(x2), num(y2), escape(stroke), num(width))
}

// rect writes a filled rectangle with tooltip as its title when not empty.
func (d *svgDoc) rect(x, y, w, h float64, fill, tooltip string) {
	fmt.Fprintf(&d.buf, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"`, num(x), num(y), num(w), num(h), escape(fill))
	if tooltip == "" {
		d.buf.WriteString("/>\n")
		return
	}
	fmt.Fprintf(&d.buf, "><title>%s</title></rect>\n", escape(tooltip))
}

// xy is a point in pixels.
type xy struct{ x, y float64 }

// polyline joins points with a line of colour stroke.
func (d *svgDoc) polyline(points []xy, stroke string) {
	var coords strings.Builder
	for i, p := range points {
		if i > 0 {
			coords.WriteByte(' ')
		}
		coords.WriteString(num(p.x) + "," + num(p.y))
	}
	fmt.Fprintf(&d.buf, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`+"\n", coords.String(), escape(stroke))
}

// Marker shapes, cycled per series after the colours.
const (
	markerCircle = iota
	markerSquare
	markerTriangle
	markerDiamond
	markerShapes
)

// marker draws shape (one of the marker constants, modulo markerShapes)
// centred on p, with tooltip as its title when not empty.
func (d *svgDoc) marker(shape int, p xy, color, tooltip string) {
	const r = 3.5
	var element string
	switch shape % markerShapes {
	case markerCircle:
		element = fmt.Sprintf(`<circle cx="%s" cy="%s" r="%s"`, num(p.x), num(p.y), num(r))
	case markerSquare:
		element = fmt.Sprintf(`<rect x="%s" y="%s" width="%s" height="%s"`, num(p.x-r), num(p.y-r), num(2*r), num(2*r))
	case markerTriangle:
		element = fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s"`, num(p.x), num(p.y-r-1), num(p.x-r-1), num(p.y+r), num(p.x+r+1), num(p.y+r))
	default:
		element = fmt.Sprintf(`<polygon points="%s,%s %s,%s %s,%s %s,%s"`, num(p.x), num(p.y-r-1), num(p.x+r+1), num(p.y), num(p.x), num(p.y+r+1), num(p.x-r-1), num(p.y))
	}
	d.buf.WriteString(element)
	fmt.Fprintf(&d.buf, ` fill="%s"`, escape(color))
	if tooltip == "" {
		d.buf.WriteString("/>\n")
		return
	}
	name := element[1:strings.IndexByte(element, ' ')]
	fmt.Fprintf(&d.buf, "><title>%s</title></%s>\n", escape(tooltip), name)
}
