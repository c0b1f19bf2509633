// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package kubectlsluice

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
)

// Fabric prints the GPUs of the physical nodes per fabric leaf: total,
// free and requested by class, and one mark per node (. free, r research,
// p production, o other, # a mix; R, P, O when it is full),
// then the largest free domain of each level: the map the demo draws,
// for any cluster.
func (o *Options) Fabric(ctx context.Context) error {
	nodes, pods, err := o.nodesAndPods(ctx)
	if err != nil {
		return err
	}
	gpus := capacity.GPUsByNode(nodes, pods, o.GPU, o.Classes.ClassOf)
	source, err := fabric.NewLabelSource(o.LevelLabels, o.LevelLabels)
	if err != nil {
		return err
	}
	var fnodes []fabric.Node
	overflowNodes := 0
	for _, n := range nodes {
		if o.Classes.IsOverflowNode(n) {
			overflowNodes++
			continue
		}
		if gpus[n.Name].Allocatable == 0 {
			continue
		}
		fnodes = append(fnodes, fabric.Node{Name: n.Name, Switches: source.Switches(n)})
	}
	if len(fnodes) == 0 {
		fmt.Fprintf(o.Out, "No physical nodes with %s.\n", o.GPU)
		return nil
	}
	// A level is named by its label's name: network.topology.nvidia.com/leaf
	// is "leaf".
	names := make([]string, len(o.LevelLabels))
	for i, l := range o.LevelLabels {
		names[i] = l[strings.LastIndex(l, "/")+1:]
	}
	tree, err := fabric.Build(names, fnodes)
	if err != nil {
		return fmt.Errorf("the fabric from the labels %v: %w", o.LevelLabels, err)
	}
	leafLevel := fabric.NodeLevel + 1
	tw := o.table()
	fmt.Fprintf(tw, "%s\tNODES\tGPUS\tFREE\tRESEARCH\tPRODUCTION\tOTHER\tMAP\n", strings.ToUpper(tree.LevelName(leafLevel)))
	var all nodeSums
	for _, d := range tree.Domains(leafLevel) {
		var s nodeSums
		var marks strings.Builder
		for _, i := range tree.NodesOf(d) {
			g := gpus[tree.Node(i).Name]
			s.add(g)
			marks.WriteByte(mark(g))
		}
		all.addSums(s)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", d.Switch, s.nodes, s.total, s.free, s.research, s.production, s.other, marks.String())
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%d\t%d\t\n", all.nodes, all.total, all.free, all.research, all.production, all.other)
	_ = tw.Flush()
	for level := leafLevel; level < tree.RootLevel(); level++ {
		var best string
		var most int64 = -1
		for _, d := range tree.Domains(level) {
			var free int64
			for _, i := range tree.NodesOf(d) {
				free += gpus[tree.Node(i).Name].Free()
			}
			if free > most {
				best, most = d.Switch, free
			}
		}
		fmt.Fprintf(o.Out, "Largest free %s: %s, %d %s free.\n", tree.LevelName(level), best, most, o.GPU)
	}
	if overflowNodes > 0 {
		fmt.Fprintf(o.Out, "%d overflow node(s) not shown: see `kubectl sluice overflow`.\n", overflowNodes)
	}
	return nil
}

type nodeSums struct {
	nodes                                    int
	total, free, research, production, other int64
}

func (s *nodeSums) add(g *capacity.NodeGPUs) {
	s.nodes++
	s.total += g.Allocatable
	s.free += g.Free()
	s.research += g.Requested["research"]
	s.production += g.Requested["production"]
	s.other += g.Requested["other"]
}

func (s *nodeSums) addSums(o nodeSums) {
	s.nodes += o.nodes
	s.total, s.free, s.research, s.production, s.other = s.total+o.total, s.free+o.free, s.research+o.research, s.production+o.production, s.other+o.other
}

// mark is one node on the map.
func mark(g *capacity.NodeGPUs) byte {
	var c byte = '.'
	used := 0
	for class, r := range g.Requested {
		if r == 0 {
			continue
		}
		used++
		c = map[string]byte{"research": 'r', "production": 'p'}[class]
		if c == 0 {
			c = 'o'
		}
	}
	if used > 1 {
		c = '#'
	}
	if g.Free() == 0 && c != '.' && c != '#' {
		c -= 'a' - 'A'
	}
	return c
}
