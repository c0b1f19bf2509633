// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHostlist bounds an expansion, so a typo like gpu[1-99999999] is an
// error rather than an out-of-memory.
const maxHostlist = 1 << 20

// ExpandHostlist expands a Slurm hostlist: "gpu[01-04,10],cpu1" ->
// gpu01 gpu02 gpu03 gpu04 gpu10 cpu1. Ranges keep the zero padding of
// their lower bound; several bracket groups in one name multiply
// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2).
func ExpandHostlist(s string) ([]string, error) {
	return expandHostlist(s, maxHostlist)
}

// expandHostlist expands s into at most room names.
func expandHostlist(s string, room int) ([]string, error) {
	var out []string
	for _, item := range splitTopLevel(strings.TrimSpace(s), ',') {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		names, err := expandOne(item, room-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// maxGroups bounds the bracket groups of one name: Slurm's hostlists
// have at most five dimensions, and each group copies the names of those
// after it.
const maxGroups = 5

// expandOne expands one item into at most room names (the cap counts
// every range and group of the whole hostlist, not each on its own).
func expandOne(item string, room int) ([]string, error) {
	if groups := strings.Count(item, "["); groups > maxGroups {
		return nil, fmt.Errorf("%.40q...: %d bracket groups in one name, at most %d", item, groups, maxGroups)
	}
	return expandGroups(item, room)
}

// expandGroups expands an item of at most maxGroups groups.
func expandGroups(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("%q: unbalanced bracket", item)
		}
		if room < 1 {
			return nil, fmt.Errorf("%q: more than %d names in all", item, maxHostlist)
		}
		return []string{item}, nil
	}
	closing := strings.IndexByte(item[open:], ']')
	if closing < 0 {
		return nil, fmt.Errorf("%q: unbalanced bracket", item)
	}
	closing += open
	prefix, ranges, rest := item[:open], item[open+1:closing], item[closing+1:]
	suffixes, err := expandGroups(rest, room)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		if lo == "" || (isRange && hi == "") {
			return nil, fmt.Errorf("%q: empty range in [%s]", item, ranges)
		}
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("%q: bad range %q", item, r)
		}
		if b-a >= (room-len(out))/max(len(suffixes), 1) { // b-a+1 names; b-a cannot overflow
			return nil, fmt.Errorf("%q: more than %d names in all", item, maxHostlist)
		}
		width := len(lo)
		for i := a; i <= b; i++ {
			num := strconv.Itoa(i)
			if len(num) < width {
				num = strings.Repeat("0", width-len(num)) + num
			}
			for _, s := range suffixes {
				out = append(out, prefix+num+s)
			}
		}
	}
	return out, nil
}
