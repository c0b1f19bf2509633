// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// bar returns a progress callback: a redrawn bar on a terminal, a line
// every 10% otherwise.
func bar(label string) func(done, total int) {
	start := time.Now()
	tty := false
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		tty = true
	}
	lastDecile := -1
	return func(done, total int) {
		if total <= 0 {
			return
		}
		frac := float64(done) / float64(total)
		elapsed := time.Since(start)
		eta := time.Duration(0)
		if done > 0 {
			eta = time.Duration(float64(elapsed) * (1 - frac) / frac)
		}
		if tty {
			width := 30
			filled := int(frac * float64(width))
			fmt.Fprintf(os.Stderr, "\r%-28s [%s%s] %3.0f%% %d/%d eta %s ", label, strings.Repeat("#", filled), strings.Repeat(".", width-filled),
				frac*100, done, total, eta.Round(time.Second))
			if done == total {
				fmt.Fprintf(os.Stderr, "done in %s\n", elapsed.Round(time.Second))
			}
			return
		}
		if d := int(frac * 10); d > lastDecile || done == total {
			lastDecile = d
			fmt.Fprintf(os.Stderr, "%s: %d/%d (%.0f%%) after %s\n", label, done, total, frac*100, elapsed.Round(time.Second))
		}
	}
}
