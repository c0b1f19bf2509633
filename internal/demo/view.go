// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ANSI colours of the GPU map.
const (
	ansiReset   = "\x1b[0m"
	ansiDim     = "\x1b[2m"
	ansiBold    = "\x1b[1m"
	ansiMagenta = "\x1b[35m"
	ansiCyan    = "\x1b[36m"
	ansiYellow  = "\x1b[33m"
	ansiHome    = "\x1b[H"
	ansiClear   = "\x1b[2J"
)

// view draws the cluster: on a terminal, a live per-leaf GPU map redrawn in
// place; otherwise plain log lines.
type view struct {
	out      io.Writer
	tty      bool
	nodes    []nodeInfo
	lines    []string // the story so far, shown under the map
	lastLine time.Time
}

// log records a story line: printed at once without a terminal, kept under
// the map with one.
func (v *view) log(at time.Duration, format string, args ...any) {
	line := fmt.Sprintf("[%6.1fs] ", at.Seconds()) + fmt.Sprintf(format, args...)
	v.lines = append(v.lines, line)
	if !v.tty {
		fmt.Fprintln(v.out, line)
	}
}

// draw shows a sample: the map on a terminal, a status line every few
// seconds otherwise.
func (v *view) draw(s sample) {
	if !v.tty {
		if time.Since(v.lastLine) >= 5*time.Second {
			v.lastLine = time.Now()
			fmt.Fprintf(v.out, "[%6.1fs]   GPUs: research %d, production %d on physical + %d on overflow; overflow pods %d (%d Ready); research pods running %d/%d\n",
				s.at.Seconds(), s.research, s.production, s.overflow, s.overflowPods, s.overflowReady, s.researchRunning, s.researchPods)
		}
		return
	}
	var b strings.Builder
	b.WriteString(ansiHome + ansiClear)
	fmt.Fprintf(&b, "%ssluice demo%s  %6.1fs   step: %s%s%s\n\n", ansiBold, ansiReset, s.at.Seconds(), ansiYellow, s.step, ansiReset)
	leaf, spine := "", ""
	for _, n := range v.nodes {
		if n.leaf != leaf {
			if leaf != "" {
				b.WriteString("\n")
			}
			if n.spine != spine {
				fmt.Fprintf(&b, "%s%s%s\n", ansiBold, n.spine, ansiReset)
				spine = n.spine
			}
			fmt.Fprintf(&b, "  %-7s ", n.leaf)
			leaf = n.leaf
		}
		for _, g := range s.gpus[n.name] {
			switch g {
			case research:
				b.WriteString(ansiMagenta + "R" + ansiReset)
			case production:
				b.WriteString(ansiCyan + "P" + ansiReset)
			default:
				b.WriteString(ansiDim + "." + ansiReset)
			}
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "\n\n  %sR%s research  %sP%s production  %s.%s free      GPUs: research %d, production %d physical + %d overflow\n",
		ansiMagenta, ansiReset, ansiCyan, ansiReset, ansiDim, ansiReset, s.research, s.production, s.overflow)
	fmt.Fprintf(&b, "  overflow node %s: %d production pods (%d Ready, running on the remote cluster)\n\n", overflowNode, s.overflowPods, s.overflowReady)
	start := max(0, len(v.lines)-12)
	for _, l := range v.lines[start:] {
		b.WriteString(l + "\n")
	}
	_, _ = io.WriteString(v.out, b.String())
}
