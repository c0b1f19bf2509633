// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxGRESCount bounds a node's count of one GRES as sluice reads it (a
// sum of its entries): far above any real node, and far from overflowing.
const MaxGRESCount = 1 << 30

// GRES is one generic resource entry of a node, e.g. "gpu:h100:3(IDX:0-2)".
type GRES struct {
	Name string
	// Type is the GRES type ("h100"), empty when untyped.
	Type  string
	Count int64
	// Indexes are the device indexes in use ("0-2"), when Slurm gives them.
	Indexes string
}

// ParseGRES parses a gres or gres_used string of any supported version:
//
//	"gpu:8"                          one untyped entry
//	"gpu:h100:8"                     typed
//	"gpu:h100:3(IDX:0-2)"            allocated, with device indexes
//	"gpu:h100:0(IDX:N/A)"            nothing allocated
//	"gpu:h100:2,gpu:h200:4(S:0-1)"   several entries, socket affinity
//	"gpu", "gpu:h100"                a count of 1 (Slurm's default)
//	"N/A", "(null)", ""              no GRES
//
// Malformed entries are reported as an error naming the entry; the entries
// that parse are returned with it.
func ParseGRES(s string) ([]GRES, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "N/A" || s == "(null)" {
		return nil, nil
	}
	var out []GRES
	var errs []string
	for _, entry := range splitTopLevel(s, ',') {
		entry = strings.TrimSpace(entry)
		if entry == "" || entry == "N/A" {
			continue
		}
		g, err := parseGRESEntry(entry)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, g)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("gres %q: %s", s, strings.Join(errs, "; "))
	}
	return out, nil
}

func parseGRESEntry(entry string) (GRES, error) {
	var g GRES
	main := entry
	// Trailing "(IDX:0-2)", "(S:0-1)" or both, e.g. "(S:0)(IDX:1)".
	for strings.HasSuffix(main, ")") {
		open := strings.LastIndex(main, "(")
		if open < 0 {
			return g, fmt.Errorf("entry %q: unbalanced parenthesis", entry)
		}
		if k, v, ok := strings.Cut(main[open+1:len(main)-1], ":"); ok && k == "IDX" {
			g.Indexes = v
		}
		main = main[:open]
	}
	parts := strings.Split(main, ":")
	g.Name = parts[0]
	if g.Name == "" {
		return g, fmt.Errorf("entry %q: no GRES name", entry)
	}
	g.Count = 1
	switch len(parts) {
	case 1:
	case 2:
		if n, err := parseCount(parts[1]); err == nil {
			g.Count = n
		} else {
			g.Type = parts[1]
		}
	case 3:
		g.Type = parts[1]
		n, err := parseCount(parts[2])
		if err != nil {
			return g, fmt.Errorf("entry %q: count %q: %v", entry, parts[2], err)
		}
		g.Count = n
	default:
		return g, fmt.Errorf("entry %q: too many fields", entry)
	}
	return g, nil
}

// parseCount reads a GRES count, allowing Slurm's unit suffixes (K, M, G).
func parseCount(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1024, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1024*1024, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1024*1024*1024, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative")
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("out of range")
	}
	return n * mult, nil
}

// splitTopLevel splits s at sep outside brackets and parentheses.
func splitTopLevel(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '(':
			depth++
		case ']', ')':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
