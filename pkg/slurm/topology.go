// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"bufio"
	"fmt"
	"io"
	"sort"
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

// ParseTopologyConf parses topology.conf (topology/tree) or the output of
// `scontrol show topology -o` (one switch per line, with Level= and
// LinkSpeed=, which are ignored): lines of KEY=VALUE pairs with SwitchName=
// and Nodes= and/or Switches=, '#' comments, a '\' at the end of a line
// continuing it, case-insensitive keys. Errors name the line.
func ParseTopologyConf(r io.Reader) (*Topology, error) {
	t := &Topology{Switches: map[string]*Switch{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	// The hostlist cap counts every name of the file, not each line's.
	room := maxHostlist
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
		for _, field := range strings.Fields(text) {
			key, value, ok := strings.Cut(field, "=")
			if !ok {
				return nil, fmt.Errorf("topology line %d: %q is not KEY=VALUE", line, field)
			}
			switch strings.ToLower(key) {
			case "switchname":
				sw.Name = value
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
		if sw.Name == "" {
			return nil, fmt.Errorf("topology line %d: no SwitchName", line)
		}
		if _, dup := t.Switches[sw.Name]; dup {
			return nil, fmt.Errorf("topology line %d: switch %q defined twice", line, sw.Name)
		}
		t.Switches[sw.Name] = sw
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading topology: %w", err)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("topology line %d: continued (\\) at the end of the file", line)
	}
	return t, t.check()
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
	fitted := map[string][]string{} // by leaf switch
	for node, leaf := range t.leafOf {
		if f, ok := fitted[leaf]; ok {
			out[node] = f
			continue
		}
		var path []string
		for n := leaf; n != ""; n = t.parent[n] {
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
		fitted[leaf], out[node] = f, f
	}
	return out
}
