// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Switch is one switch of Slurm's topology/tree plugin.
type Switch struct {
	Name string
	// Nodes are the nodes attached directly (leaf switches).
	Nodes []string
	// Switches are the switches below this one.
	Switches []string
}

// Topology is Slurm's switch tree.
type Topology struct {
	Switches map[string]*Switch
	// leafOf is each node's lowest switch (set by check).
	leafOf map[string]string
	parent map[string]string
}

// ParseTopologyConf parses topology.conf (topology/tree or topology/block)
// or the output of `scontrol show topology -o` (one switch or block per
// line, with Level=, LinkSpeed= and BlockIndex=, which are ignored): lines
// of KEY=VALUE pairs with SwitchName= and Nodes= and/or Switches=, or
// BlockName= and Nodes= with one BlockSizes= line (aggregated blocks
// become the levels above the blocks, see aggregate), '#' comments, a '\'
// at the end of a line continuing it, case-insensitive keys. Errors name
// the line.
func ParseTopologyConf(r io.Reader) (*Topology, error) {
	t := &Topology{Switches: map[string]*Switch{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	// The hostlist cap counts every name of the file, not each line's.
	room := maxHostlist
	var blocks blockFile
	trees := false
	line, next := 0, 0
	var pending strings.Builder
	for sc.Scan() {
		next++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		if pending.Len() == 0 {
			line = next // errors name the first line of a continued one
		}
		// As Slurm reads it: a backslash ending a line (its comment cut
		// off) joins the next line to it as it is.
		if cont, ok := strings.CutSuffix(strings.TrimRight(text, " \t"), `\`); ok {
			pending.WriteString(cont)
			continue
		}
		pending.WriteString(text)
		text = strings.TrimSpace(pending.String())
		pending.Reset()
		if text == "" {
			continue
		}
		sw := &Switch{}
		kind := ""
		for _, field := range strings.Fields(text) {
			key, value, ok := strings.Cut(field, "=")
			if !ok {
				return nil, fmt.Errorf("topology line %d: %q is not KEY=VALUE", line, field)
			}
			key = strings.ToLower(key)
			if kind == "" {
				kind = key
			}
			switch key {
			case "switchname", "blockname", "aggregatedblock":
				sw.Name = value
			case "blocksizes", "blocksize":
				sizes, err := blockSizes(value)
				if err != nil {
					return nil, fmt.Errorf("topology line %d: %s: %w", line, key, err)
				}
				if key == "blocksizes" {
					blocks.sizes = sizes
				} else {
					blocks.seen = append(blocks.seen, sizes...)
				}
			case "nodes":
				names, err := expandHostlist(value, room)
				if err != nil {
					return nil, fmt.Errorf("topology line %d: Nodes: %w", line, err)
				}
				room -= len(names)
				sw.Nodes = append(sw.Nodes, names...)
			case "switches":
				names, err := expandHostlist(value, room)
				if err != nil {
					return nil, fmt.Errorf("topology line %d: Switches: %w", line, err)
				}
				room -= len(names)
				sw.Switches = append(sw.Switches, names...)
			}
		}
		if sw.Name == "" && kind != "blocksizes" {
			return nil, fmt.Errorf("topology line %d: no SwitchName or BlockName", line)
		}
		switch kind {
		case "blocksizes":
			continue
		case "aggregatedblock":
			continue // `scontrol show topology` output: rebuilt from the sizes
		case "blockname":
			if len(sw.Switches) > 0 {
				return nil, fmt.Errorf("topology line %d: block %q lists switches", line, sw.Name)
			}
			blocks.names = append(blocks.names, sw.Name)
		case "switchname":
			trees = true
		default:
			return nil, fmt.Errorf("topology line %d: no SwitchName or BlockName", line)
		}
		if trees && len(blocks.names) > 0 {
			return nil, fmt.Errorf("topology line %d: switches (topology/tree) and blocks (topology/block) in one file", line)
		}
		if _, dup := t.Switches[sw.Name]; dup {
			return nil, fmt.Errorf("topology line %d: %s %q defined twice", line, map[bool]string{true: "block", false: "switch"}[kind == "blockname"], sw.Name)
		}
		t.Switches[sw.Name] = sw
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading topology: %w", err)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("topology line %d: continued (\\) at the end of the file", line)
	}
	if len(blocks.names) > 0 {
		if err := t.aggregate(blocks); err != nil {
			return nil, err
		}
	} else if blocks.sizes != nil {
		return nil, fmt.Errorf("topology: BlockSizes without any BlockName")
	}
	return t, t.check()
}

// blockFile is what a topology/block file says.
type blockFile struct {
	names []string // base blocks, in the order defined (Slurm's order)
	sizes []int    // BlockSizes, in nodes
	seen  []int    // BlockSize= of `scontrol show topology` lines
}

func blockSizes(value string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number of nodes", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// aggregate turns blocks into the switch tree the rest reads: each base
// block a leaf switch; each larger block size (BlockSizes, in nodes) a
// level of switches over consecutive blocks of the level below, in the
// order the blocks are defined, as Slurm aggregates them (BlockSizes=4,8
// over blocks of 4 nodes: block1 and block2 make one 8-node block, named
// "block1-block2"; a block left alone at a size is its own block there,
// named with the size, "block3@8"). Without BlockSizes, every block stands
// alone.
func (t *Topology) aggregate(b blockFile) error {
	sizes := b.sizes
	if sizes == nil && len(b.seen) > 0 {
		sizes = slices.Compact(slices.Sorted(slices.Values(b.seen)))
	}
	base := 0
	for _, name := range b.names {
		base = max(base, len(t.Switches[name].Nodes))
	}
	if len(sizes) == 0 {
		return nil
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			return fmt.Errorf("topology: BlockSizes %v must grow", sizes)
		}
	}
	if sizes[0] < base {
		return fmt.Errorf("topology: the base block size %d is smaller than the %d nodes of the largest block", sizes[0], base)
	}
	type span struct{ name, first, last string } // first and last base block
	level := make([]span, len(b.names))
	for i, n := range b.names {
		level[i] = span{n, n, n}
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i]%sizes[i-1] != 0 {
			return fmt.Errorf("topology: block size %d is not a multiple of %d", sizes[i], sizes[i-1])
		}
	}
	for i := 1; i < len(sizes) && len(level) > 1; i++ { // sizes past the whole add nothing
		k := sizes[i] / sizes[i-1]
		var next []span
		for j := 0; j < len(level); j += k {
			group := level[j:min(j+k, len(level))]
			agg := span{first: group[0].first, last: group[len(group)-1].last}
			agg.name = agg.first + "-" + agg.last
			if agg.first == agg.last {
				agg.name = agg.first
			}
			if _, taken := t.Switches[agg.name]; taken {
				// The same blocks as a level below (a block that stands
				// alone at this size): named with the size.
				agg.name += "@" + strconv.Itoa(sizes[i])
			}
			if _, dup := t.Switches[agg.name]; dup {
				return fmt.Errorf("topology: aggregated block %q is also a block's name", agg.name)
			}
			sw := &Switch{Name: agg.name}
			for _, g := range group {
				sw.Switches = append(sw.Switches, g.name)
			}
			t.Switches[agg.name] = sw
			next = append(next, agg)
		}
		level = next
	}
	return nil
}

// check rejects references to undefined switches and cycles, and finds
// each node's switch: the lowest that lists it. `scontrol show topology -o`
// lists every node under each switch above its leaf too, so the first
// switch found (by name) is not it; a node listed under two switches
// neither of which is below the other is an error naming both.
func (t *Topology) check() error {
	parent := map[string]string{}
	for _, sw := range t.Switches {
		for _, c := range sw.Switches {
			if _, ok := t.Switches[c]; !ok {
				return fmt.Errorf("topology: switch %q lists undefined switch %q", sw.Name, c)
			}
			if p, ok := parent[c]; ok && p != sw.Name {
				return fmt.Errorf("topology: switch %q has two parents, %q and %q", c, p, sw.Name)
			}
			parent[c] = sw.Name
		}
	}
	for name := range t.Switches {
		seen := map[string]bool{}
		for n := name; n != ""; n = parent[n] {
			if seen[n] {
				return fmt.Errorf("topology: switch %q is in a cycle", name)
			}
			seen[n] = true
		}
	}
	below := func(low, high string) bool { // low is high or under it
		for n := low; n != ""; n = parent[n] {
			if n == high {
				return true
			}
		}
		return false
	}
	t.parent, t.leafOf = parent, map[string]string{}
	for _, name := range t.names() {
		for _, node := range t.Switches[name].Nodes {
			prev, ok := t.leafOf[node]
			switch {
			case !ok || below(name, prev):
				t.leafOf[node] = name
			case below(prev, name):
			default:
				return fmt.Errorf("topology: node %q is listed under switches %q and %q, neither of which is below the other", node, prev, name)
			}
		}
	}
	return nil
}

func (t *Topology) names() []string {
	names := make([]string, 0, len(t.Switches))
	for n := range t.Switches {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Paths returns, for every node, its switches from the leaf up to the top
// of its tree (e.g. [leaf1 spine1 core]). levels is the number of levels
// the caller knows: shorter paths are padded with their topmost switch
// (nodes under one top switch stay together at every level above it), and
// longer ones keep their lowest levels... and the top switch last, so the
// highest level still joins what the tree joins.
func (t *Topology) Paths(levels int) map[string][]string {
	out := map[string][]string{}
	from := t.SwitchPaths(levels)
	for node, leaf := range t.leafOf {
		out[node] = from[leaf]
	}
	return out
}

// SwitchPaths returns the path (as Paths fits it) from every switch or
// block up, whether it lists nodes or not: Slurm places dynamic nodes
// under one by their own Topology=.
func (t *Topology) SwitchPaths(levels int) map[string][]string {
	out := make(map[string][]string, len(t.Switches))
	for name := range t.Switches {
		var path []string
		for n := name; n != ""; n = t.parent[n] {
			path = append(path, n)
		}
		f := make([]string, levels)
		for i := range f {
			switch {
			case i == levels-1:
				f[i] = path[len(path)-1]
			case i < len(path):
				f[i] = path[i]
			default:
				f[i] = path[len(path)-1]
			}
		}
		out[name] = f
	}
	return out
}
