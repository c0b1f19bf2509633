// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package fabric models the InfiniBand fabric of a GPU cluster as a tree
// (node -> leaf -> spine -> block -> cluster, any depth) and places gangs in
// it: the lowest level with a domain that holds the whole gang, the best-fit
// domain at that level, the fewest sub-domains and nodes inside it.
//
// The tree is built once per change of the node set or labels; per
// scheduling cycle, callers pass a cheap overlay of per-node capacity (how
// many more pods of the gang each node can take) aligned to the tree's node
// indices. The package has no scheduler-framework types in its API.
package fabric

import (
	"fmt"
	"sort"
	"strings"
)

// NodeLevel is the level index of single nodes. Switch levels are 1..n in
// the order configured (leaf = 1), and the cluster root is n+1.
const NodeLevel = 0

// Node is a node as the fabric sees it: a name and, per switch level from
// the lowest up, the switch it hangs off ("" when unknown).
type Node struct {
	Name     string
	Switches []string
}

// Domain is a subtree of the fabric: a node, a switch with everything below
// it, or the whole cluster.
type Domain struct {
	// Level is NodeLevel for a node, 1.. for switch levels, and
	// Tree.RootLevel() for the cluster.
	Level int
	// Name is unique in the tree: a node's name, "<level>/<switch>" for a
	// switch, or "cluster". A switch name that appears under two different
	// parents (inconsistent labels) makes two domains, suffixed with the
	// parent's name, because a domain has exactly one parent.
	Name string
	// Switch is the switch's name as the nodes' labels give it, or the node
	// name for nodes and for the stand-in domains of nodes missing a label.
	Switch   string
	Parent   *Domain
	Children []*Domain
	// first and last bound the domain's nodes in Tree.order.
	first, last int
}

// IsNode reports whether d is a single node.
func (d *Domain) IsNode() bool { return d.Level == NodeLevel }

// Tree is the fabric tree. It is immutable once built, so a tree can be
// shared between scheduling cycles and goroutines.
type Tree struct {
	levels []string
	root   *Domain
	// order lists node indices so that every domain's nodes are contiguous.
	order []int
	// nodes[i] is node i's domain; nodeIndex maps names to i.
	nodes     []*Domain
	nodeIndex map[string]int
	byLevel   [][]*Domain
}

// Build builds a tree from nodes. levels names the switch levels from the
// lowest up (e.g. leaf, spine, block); every node's Switches must have that
// many entries.
//
// A node whose switch at some level is unknown gets a stand-in switch of its
// own at that level, named "~<node>", below its known switch at the next
// level if any. So an unlabeled node is its own leaf, spine and block: it is
// never put close to nodes it may be far from, and gangs that need more than
// one node do not land on it unless nothing better exists.
func Build(levels []string, nodes []Node) (*Tree, error) {
	t := &Tree{
		levels:    append([]string(nil), levels...),
		nodes:     make([]*Domain, len(nodes)),
		nodeIndex: make(map[string]int, len(nodes)),
	}
	top := len(levels) + 1
	t.root = &Domain{Level: top, Name: "cluster", Switch: "cluster"}
	// switches[level-1][path] is the switch domain whose path from the top
	// (block/spine/leaf names) is path.
	switches := make([]map[string]*Domain, len(levels))
	for i := range switches {
		switches[i] = map[string]*Domain{}
	}
	for i, n := range nodes {
		if len(n.Switches) != len(levels) {
			return nil, fmt.Errorf("node %q has %d switch levels, want %d", n.Name, len(n.Switches), len(levels))
		}
		if _, dup := t.nodeIndex[n.Name]; dup {
			return nil, fmt.Errorf("node %q appears twice", n.Name)
		}
		t.nodeIndex[n.Name] = i
		parent := t.root
		path := ""
		for level := len(levels); level >= 1; level-- {
			sw := n.Switches[level-1]
			if sw == "" {
				sw = "~" + n.Name
			}
			path += "/" + sw
			d, ok := switches[level-1][path]
			if !ok {
				d = &Domain{Level: level, Switch: sw, Parent: parent}
				switches[level-1][path] = d
				parent.Children = append(parent.Children, d)
			}
			parent = d
		}
		node := &Domain{Level: NodeLevel, Name: n.Name, Switch: n.Name, Parent: parent}
		parent.Children = append(parent.Children, node)
		t.nodes[i] = node
	}
	t.nameSwitches(switches)
	t.byLevel = make([][]*Domain, top+1)
	t.order = make([]int, 0, len(nodes))
	t.index(t.root)
	return t, nil
}

// nameSwitches names switch domains "<level>/<switch>", adding the parent's
// name where one switch name occurs under several parents.
func (t *Tree) nameSwitches(switches []map[string]*Domain) {
	for level := len(t.levels); level >= 1; level-- {
		count := map[string]int{}
		for _, d := range switches[level-1] {
			count[d.Switch]++
		}
		for _, d := range switches[level-1] {
			d.Name = t.levels[level-1] + "/" + d.Switch
			if count[d.Switch] > 1 {
				d.Name += "@" + d.Parent.Name
			}
		}
	}
}

// index sorts children by name (so every walk is deterministic), lays the
// nodes out in tree order and records each domain's node range.
func (t *Tree) index(d *Domain) {
	t.byLevel[d.Level] = append(t.byLevel[d.Level], d)
	if d.IsNode() {
		d.first = len(t.order)
		t.order = append(t.order, t.nodeIndex[d.Name])
		d.last = len(t.order)
		return
	}
	sort.Slice(d.Children, func(i, j int) bool { return d.Children[i].Name < d.Children[j].Name })
	d.first = len(t.order)
	for _, c := range d.Children {
		t.index(c)
	}
	d.last = len(t.order)
}

// Levels returns the switch level names, lowest first.
func (t *Tree) Levels() []string { return t.levels }

// RootLevel is the level index of the cluster root.
func (t *Tree) RootLevel() int { return len(t.levels) + 1 }

// LevelIndex returns the index of a named switch level; "node" is
// NodeLevel and "any" is the root level.
func (t *Tree) LevelIndex(name string) (int, bool) {
	switch name {
	case "node":
		return NodeLevel, true
	case "any":
		return t.RootLevel(), true
	}
	for i, l := range t.levels {
		if l == name {
			return i + 1, true
		}
	}
	return 0, false
}

// LevelName names a level index.
func (t *Tree) LevelName(level int) string {
	switch {
	case level == NodeLevel:
		return "node"
	case level >= t.RootLevel():
		return "cluster"
	}
	return t.levels[level-1]
}

// Root is the cluster.
func (t *Tree) Root() *Domain { return t.root }

// NumNodes is the number of nodes in the tree.
func (t *Tree) NumNodes() int { return len(t.nodes) }

// NodeIndex returns the index of the named node.
func (t *Tree) NodeIndex(name string) (int, bool) {
	i, ok := t.nodeIndex[name]
	return i, ok
}

// Node returns node i's domain.
func (t *Tree) Node(i int) *Domain { return t.nodes[i] }

// Domains returns the domains of a level, sorted by name.
func (t *Tree) Domains(level int) []*Domain { return t.byLevel[level] }

// NodesOf returns the indices of the nodes in d.
func (t *Tree) NodesOf(d *Domain) []int { return t.order[d.first:d.last] }

// Ancestor returns node i's domain at level (the node itself at NodeLevel).
func (t *Tree) Ancestor(i, level int) *Domain {
	d := t.nodes[i]
	for d.Level < level && d.Parent != nil {
		d = d.Parent
	}
	return d
}

// Contains reports whether node i is in d.
func (t *Tree) Contains(d *Domain, i int) bool {
	return t.Ancestor(i, d.Level) == d
}

// String renders the tree one domain per line, for debugging and tests.
func (t *Tree) String() string {
	var b strings.Builder
	var walk func(d *Domain, depth int)
	walk = func(d *Domain, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), d.Name)
		for _, c := range d.Children {
			walk(c, depth+1)
		}
	}
	walk(t.root, 0)
	return b.String()
}
