// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabric

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var threeLevels = []string{"leaf", "spine", "block"}

// cluster builds a regular fabric: blocks x spines x leaves x nodes, node
// names b<block>s<spine>l<leaf>n<node>.
func cluster(t testing.TB, blocks, spines, leaves, nodes int) *Tree {
	t.Helper()
	var ns []Node
	for b := 0; b < blocks; b++ {
		for s := 0; s < spines; s++ {
			for l := 0; l < leaves; l++ {
				for n := 0; n < nodes; n++ {
					ns = append(ns, Node{
						Name:     fmt.Sprintf("b%ds%dl%dn%02d", b, s, l, n),
						Switches: []string{fmt.Sprintf("b%ds%dl%d", b, s, l), fmt.Sprintf("b%ds%d", b, s), fmt.Sprintf("b%d", b)},
					})
				}
			}
		}
	}
	tree, err := Build(threeLevels, ns)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// slotsOf gives every node `full` slots except those listed.
func slotsOf(t *Tree, full int, except map[string]int) []int {
	s := make([]int, t.NumNodes())
	for i := range s {
		s[i] = full
		if v, ok := except[t.Node(i).Name]; ok {
			s[i] = v
		}
	}
	return s
}

func TestBuildMissingAndInconsistentLabels(t *testing.T) {
	tree, err := Build([]string{"leaf", "spine"}, []Node{
		{Name: "a1", Switches: []string{"l1", "s1"}},
		{Name: "a2", Switches: []string{"l1", "s1"}},
		// No leaf label: its own leaf under s1.
		{Name: "b1", Switches: []string{"", "s1"}},
		// No labels at all: its own leaf and spine.
		{Name: "c1", Switches: []string{"", ""}},
		// Leaf l1 again, but under s2: a different domain.
		{Name: "d1", Switches: []string{"l1", "s2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `cluster
  spine/s1
    leaf/l1@spine/s1
      a1
      a2
    leaf/~b1
      b1
  spine/s2
    leaf/l1@spine/s2
      d1
  spine/~c1
    leaf/~c1
      c1
`
	if diff := cmp.Diff(want, tree.String()); diff != "" {
		t.Errorf("tree (-want,+got):\n%s", diff)
	}
	if _, err := Build([]string{"leaf"}, []Node{{Name: "x", Switches: []string{"l", "s"}}}); err == nil {
		t.Error("want an error for a node with too many switch levels")
	}
	if _, err := Build([]string{"leaf"}, []Node{{Name: "x", Switches: []string{"l"}}, {Name: "x", Switches: []string{"l"}}}); err == nil {
		t.Error("want an error for a duplicate node")
	}
}

// describe renders a placement as "<domain>: node=pods ..." in tree order.
func describe(t *Tree, p Placement) string {
	var parts []string
	for _, i := range p.NodeIndices(t) {
		parts = append(parts, fmt.Sprintf("%s=%d", t.Node(i).Name, p.Nodes[i]))
	}
	return p.Domain.Name + ": " + strings.Join(parts, " ")
}

func TestPlace(t *testing.T) {
	// 1 block x 2 spines x 2 leaves x 4 nodes; slots are whole-node pods
	// (8-GPU pods) unless the case says otherwise.
	tests := []struct {
		name   string
		slots  map[string]int // nodes with other than 1 slot
		full   int
		req    Request
		want   string
		wantOK bool
	}{
		{
			name: "fits one node: node level, fullest node that fits",
			full: 8, slots: map[string]int{"b0s0l0n00": 2, "b0s1l1n03": 3},
			req:    Request{Pods: 3, MaxLevel: 4},
			want:   "b0s1l1n03: b0s1l1n03=3",
			wantOK: true,
		},
		{
			// leaf b0s0l0 has 4 free nodes, b0s1l1 only 2 (best fit).
			name: "fits one leaf: best-fit leaf keeps the emptier leaf whole",
			full: 1, slots: map[string]int{"b0s1l1n00": 0, "b0s1l1n01": 0, "b0s0l1n00": 0, "b0s1l0n00": 0},
			req:    Request{Pods: 2, MaxLevel: 4},
			want:   "leaf/b0s1l1: b0s1l1n02=1 b0s1l1n03=1",
			wantOK: true,
		},
		{
			// No leaf holds 6; spine b0s1 has 4+3 free, b0s0 4+4: b0s1 is
			// the best fit; inside it two leaves (the fewest), the smaller
			// one filled first.
			name: "larger than any leaf: fewest leaves under the best-fit spine",
			full: 1, slots: map[string]int{"b0s1l1n00": 0},
			req:    Request{Pods: 6, MaxLevel: 4},
			want:   "spine/b0s1: b0s1l0n00=1 b0s1l0n01=1 b0s1l0n02=1 b0s1l1n01=1 b0s1l1n02=1 b0s1l1n03=1",
			wantOK: true,
		},
		{
			name:   "required leaf that no leaf holds",
			full:   1,
			req:    Request{Pods: 5, MaxLevel: 1},
			wantOK: false,
		},
		{
			name: "pinned members keep the gang in their leaf",
			full: 1,
			req:  Request{Pods: 2, MaxLevel: 4, Pinned: []int{}},
			// overwritten below with the index of b0s1l0n00
			want:   "leaf/b0s1l0: b0s1l0n01=1 b0s1l0n02=1",
			wantOK: true,
		},
		{
			name:   "whole cluster",
			full:   1,
			req:    Request{Pods: 16, MaxLevel: 4},
			want:   "block/b0: " + allNodes(),
			wantOK: true,
		},
		{
			name:   "more than the cluster",
			full:   1,
			req:    Request{Pods: 17, MaxLevel: 4},
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := cluster(t, 1, 2, 2, 4)
			if strings.HasPrefix(tt.name, "pinned") {
				i, _ := tree.NodeIndex("b0s1l0n00")
				tt.req.Pinned = []int{i}
				tt.slots = map[string]int{"b0s1l0n00": 0}
			}
			o := tree.Overlay(slotsOf(tree, tt.full, tt.slots))
			got, ok := o.Place(tt.req)
			if ok != tt.wantOK {
				t.Fatalf("Place ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, describe(tree, got)); diff != "" {
				t.Errorf("placement (-want,+got):\n%s", diff)
			}
		})
	}
}

func allNodes() string {
	var parts []string
	for s := 0; s < 2; s++ {
		for l := 0; l < 2; l++ {
			for n := 0; n < 4; n++ {
				parts = append(parts, fmt.Sprintf("b0s%dl%dn%02d=1", s, l, n))
			}
		}
	}
	return strings.Join(parts, " ")
}

// TestFillPicksSmallestSufficientParts is the worked example of fill's doc:
// 10 pods, leaves with 8, 8, 4 and 3 free -> leaves of 3 and 8.
func TestFillPicksSmallestSufficientParts(t *testing.T) {
	var ns []Node
	for leaf, n := range map[string]int{"a": 8, "b": 8, "c": 4, "d": 3} {
		for i := 0; i < n; i++ {
			ns = append(ns, Node{Name: fmt.Sprintf("%s%d", leaf, i), Switches: []string{leaf, "s"}})
		}
	}
	tree, err := Build([]string{"leaf", "spine"}, ns)
	if err != nil {
		t.Fatal(err)
	}
	o := tree.Overlay(slotsOf(tree, 1, nil))
	p, ok := o.Place(Request{Pods: 10, MaxLevel: tree.RootLevel()})
	if !ok {
		t.Fatal("no placement")
	}
	var parts []string
	for _, d := range p.Parts {
		parts = append(parts, fmt.Sprintf("%s:%d", d.Name, o.Free(d)))
	}
	sort.Strings(parts)
	if diff := cmp.Diff([]string{"leaf/a:8", "leaf/d:3"}, parts); diff != "" {
		t.Errorf("parts (-want,+got):\n%s", diff)
	}
	if p.Leftover != 23-10 {
		t.Errorf("leftover in the spine = %d, want 13 (23 free - 10)", p.Leftover)
	}
}

func TestCandidatesAndExclusion(t *testing.T) {
	tree := cluster(t, 1, 2, 2, 4)
	o := tree.Overlay(slotsOf(tree, 1, map[string]int{"b0s0l0n00": 0}))
	req := Request{Pods: 4, MaxLevel: 2}
	var got []string
	for _, p := range o.Candidates(req, 2) {
		got = append(got, p.Domain.Name)
	}
	// Leaves with 4 free: three of them (b0s0l1, b0s1l0, b0s1l1), by name;
	// then spines: b0s0 (7 free) before b0s1 (8 free).
	want := []string{"leaf/b0s0l1", "leaf/b0s1l0", "spine/b0s0", "spine/b0s1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candidates (-want,+got):\n%s", diff)
	}
	leaf := o.Candidates(req, 1)[0].Domain
	req.Excluded = map[*Domain]bool{leaf: true}
	if p, _ := o.Place(req); p.Domain.Name != "leaf/b0s1l0" {
		t.Errorf("with %s excluded, placed in %s, want leaf/b0s1l0", leaf.Name, p.Domain.Name)
	}
}

func TestLowerBoundAndSpan(t *testing.T) {
	tree := cluster(t, 1, 2, 2, 4)
	// Leaves: 4, 2, 4, 1 free.
	o := tree.Overlay(slotsOf(tree, 1, map[string]int{
		"b0s0l1n00": 0, "b0s0l1n01": 0, "b0s1l1n00": 0, "b0s1l1n01": 0, "b0s1l1n02": 0,
	}))
	for _, tt := range []struct {
		pods, level, want int
		ok                bool
	}{
		{pods: 4, level: 1, want: 1, ok: true},
		{pods: 5, level: 1, want: 2, ok: true},
		{pods: 9, level: 1, want: 3, ok: true},
		{pods: 11, level: 1, want: 4, ok: true},
		{pods: 12, level: 1, ok: false},
		{pods: 3, level: NodeLevel, want: 3, ok: true},
		{pods: 7, level: 2, want: 2, ok: true},
	} {
		got, ok := o.LowerBound(tt.pods, tt.level)
		if got != tt.want || ok != tt.ok {
			t.Errorf("LowerBound(%d, %s) = %d, %v; want %d, %v", tt.pods, tree.LevelName(tt.level), got, ok, tt.want, tt.ok)
		}
	}
	var nodes []int
	for _, n := range []string{"b0s0l0n00", "b0s0l0n01", "b0s1l0n00"} {
		i, _ := tree.NodeIndex(n)
		nodes = append(nodes, i)
	}
	if got := tree.Span(nodes, 1); got != 2 {
		t.Errorf("leaves spanned = %d, want 2", got)
	}
	if got := tree.Span(nodes, 3); got != 1 {
		t.Errorf("blocks spanned = %d, want 1", got)
	}
}

func TestLevelNames(t *testing.T) {
	tree := cluster(t, 1, 1, 1, 1)
	for name, want := range map[string]int{"node": 0, "leaf": 1, "spine": 2, "block": 3, "any": 4} {
		if got, ok := tree.LevelIndex(name); !ok || got != want {
			t.Errorf("LevelIndex(%q) = %d, %v; want %d", name, got, ok, want)
		}
		if name != "any" && tree.LevelName(want) != name {
			t.Errorf("LevelName(%d) = %q, want %q", want, tree.LevelName(want), name)
		}
	}
	if _, ok := tree.LevelIndex("rack"); ok {
		t.Error("LevelIndex(rack) should not exist")
	}
}
