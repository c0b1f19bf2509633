// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/fabric"
)

// TopologySource is a fabric.Source that reads the fabric from Slurm's
// topology.conf (or saved `scontrol show topology -o` output): switches
// with Nodes= are the first level, their parents the next, and so on. The
// file is read again when it changes. A node is found by its Slurm name (a
// label, or its own name); a node the file does not list is its own switch
// at every level. With FollowNodes, a node whose own Slurm answer names a
// switch or block of the file (v0.0.43 on) is placed there instead.
type TopologySource struct {
	file      string
	nameLabel string
	levels    []string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	paths   map[string][]string
	from    map[string][]string // each switch's path up
	err     error
	// units are the switches or blocks Slurm's node answers name, by
	// Slurm node name; unitsGen counts their changes.
	units    map[string][]string
	unitsGen int
}

var (
	_ fabric.Source    = &TopologySource{}
	_ fabric.Versioned = &TopologySource{}
)

// NewTopologySource reads file, whose tiers are levels (bottom-up); nodes
// are found by the node label nameLabel (empty: their names). A file that
// does not parse is an error now; later, the last good tree stays.
func NewTopologySource(file, nameLabel string, levels []string) (*TopologySource, error) {
	s := &TopologySource{file: file, nameLabel: nameLabel, levels: levels}
	s.refresh()
	if s.err != nil {
		return nil, s.err
	}
	return s, nil
}

// refresh parses the file again if it changed; a file that stops parsing
// keeps the last good tree (and the error is kept for Version).
func (s *TopologySource) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := os.Stat(s.file)
	if err != nil {
		s.err = fmt.Errorf("slurm topology file: %w", err)
		return
	}
	if s.paths != nil && st.ModTime().Equal(s.modTime) && st.Size() == s.size {
		return
	}
	f, err := os.Open(s.file)
	if err != nil {
		s.err = fmt.Errorf("slurm topology file: %w", err)
		return
	}
	defer f.Close()
	topo, err := ParseTopologyConf(f)
	if err != nil {
		s.err = fmt.Errorf("slurm topology file %s: %w", s.file, err)
		return
	}
	s.paths, s.from, s.modTime, s.size, s.err = topo.Paths(len(s.levels)), topo.SwitchPaths(len(s.levels)), st.ModTime(), st.Size(), nil
}

// FollowNodes places each node where its own answer in cache's snapshots
// puts it ("topology": "tree:leaf3", Slurm 25.05 on: dynamic nodes, and
// nodes an admin moved with `scontrol update NodeName=.. Topology=`): under
// the first switch or block it names that the file defines, with the
// file's tree above. Names the file does not define are ignored.
func (s *TopologySource) FollowNodes(cache *Cache) {
	follow := func(snap *Snapshot) {
		if snap == nil {
			return
		}
		units := map[string][]string{}
		for name, n := range snap.Nodes {
			if len(n.Topology) > 0 {
				units[name] = n.Topology
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !maps.EqualFunc(units, s.units, slices.Equal) {
			s.units = units
			s.unitsGen++
		}
	}
	cache.OnChange(func(_, cur *Snapshot) { follow(cur) })
	snap, _, _ := cache.Snapshot()
	follow(snap)
}

// Levels names the configured levels.
func (s *TopologySource) Levels() []string { return s.levels }

// Version changes when the file does.
func (s *TopologySource) Version() string {
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d/%d/%d", s.modTime.UnixNano(), s.size, s.unitsGen)
}

// Switches returns the node's path in the Slurm tree.
func (s *TopologySource) Switches(node *v1.Node) []string {
	name := node.Name
	if s.nameLabel != "" && node.Labels[s.nameLabel] != "" {
		name = node.Labels[s.nameLabel]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.units[name] {
		if p, ok := s.from[u]; ok {
			return p
		}
	}
	if p, ok := s.paths[name]; ok {
		return p
	}
	return make([]string, len(s.levels))
}

// Relevant reports whether the node's Slurm name changed.
func (s *TopologySource) Relevant(old, new *v1.Node) bool {
	return s.nameLabel != "" && old.Labels[s.nameLabel] != new.Labels[s.nameLabel]
}
