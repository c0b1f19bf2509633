// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"sort"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/capacity"
)

// Room is the free room of the Ready overflow nodes: allocatable minus the
// pods already there. Evicting a production pod is only worth it when its
// replacement has room on an overflow node, so victims are taken from the
// room as they are chosen.
type Room struct {
	nodes []roomNode
}

type roomNode struct {
	name string
	free capacity.Resources
}

// RoomOf computes the room of the overflow nodes among nodes. NotReady
// overflow nodes offer none.
func RoomOf(c *Classes, nodes []fwk.NodeInfo) *Room {
	r := &Room{}
	for _, ni := range nodes {
		n := ni.Node()
		if !c.IsOverflowNode(n) || !NodeReady(n) {
			continue
		}
		r.nodes = append(r.nodes, roomNode{name: n.Name, free: capacity.FreeOf(ni, nil)})
	}
	sort.Slice(r.nodes, func(i, j int) bool { return r.nodes[i].name < r.nodes[j].name })
	return r
}

// Clone copies the room, so a plan can be tried and thrown away.
func (r *Room) Clone() *Room {
	out := &Room{nodes: make([]roomNode, len(r.nodes))}
	for i, n := range r.nodes {
		out.nodes[i] = roomNode{name: n.name, free: n.free.Add(capacity.Resources{})}
	}
	return out
}

// Take reserves room for requests on the first overflow node that has it
// and returns that node's name, or "" when no overflow node has room.
func (r *Room) Take(requests capacity.Resources) string {
	for i := range r.nodes {
		if r.nodes[i].free.Covers(requests) {
			r.nodes[i].free = r.nodes[i].free.Sub(requests)
			return r.nodes[i].name
		}
	}
	return ""
}

// Nodes is the number of Ready overflow nodes.
func (r *Room) Nodes() int { return len(r.nodes) }
