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
}

// ParseTopologyConf parses topology.conf (topology/tree) or the output of
// `scontrol show topology -o` (one switch per line, with Level= and
// LinkSpeed=, which are ignored): lines of KEY=VALUE pairs with SwitchName=
// and Nodes= and/or Switches=, '#' comments, case-insensitive keys. Errors
// name the line.
func ParseTopologyConf(r io.Reader) (*Topology, error) {
	t := &Topology{Switches: map[string]*Switch{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
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
				names, err := ExpandHostlist(value)
				if err != nil {
					return nil, fmt.Errorf("topology line %d: Nodes: %w", line, err)
				}
				sw.Nodes = append(sw.Nodes, names...)
			case "switches":
				names, err := ExpandHostlist(value)
				if err != nil {
					return nil, fmt.Errorf("topology line %d: Switches: %w", line, err)
				}
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
	return t, t.check()
}

// check rejects references to undefined switches and cycles.
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
	return nil
}

// Paths returns, for every node, its switches from the leaf up to the top
// of its tree (e.g. [leaf1 spine1 core]). levels is the number of levels
// the caller knows: shorter paths are padded with their topmost switch
// (nodes under one top switch stay together at every level above it), and
// longer ones keep their lowest levels... and the top switch last, so the
// highest level still joins what the tree joins.
func (t *Topology) Paths(levels int) map[string][]string {
	parent := map[string]string{}
	for _, sw := range t.Switches {
		for _, c := range sw.Switches {
			parent[c] = sw.Name
		}
	}
	names := make([]string, 0, len(t.Switches))
	for n := range t.Switches {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string][]string{}
	for _, name := range names {
		sw := t.Switches[name]
		if len(sw.Nodes) == 0 {
			continue
		}
		var path []string
		for n := name; n != ""; n = parent[n] {
			path = append(path, n)
		}
		fitted := make([]string, levels)
		for i := range fitted {
			switch {
			case i == levels-1:
				fitted[i] = path[len(path)-1]
			case i < len(path):
				fitted[i] = path[i]
			default:
				fitted[i] = path[len(path)-1]
			}
		}
		for _, node := range sw.Nodes {
			if _, ok := out[node]; !ok {
				out[node] = fitted
			}
		}
	}
	return out
}
