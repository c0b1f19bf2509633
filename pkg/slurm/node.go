// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurm reads Slurm's view of the nodes from slurmrestd: node states
// (IDLE, MIXED, DRAIN, DOWN, ...), the reason an admin or a health check
// gave, and the GPUs (GRES) that Slurm jobs hold. It speaks the node API of
// every slurmrestd from Slurm 22.05 (v0.0.37, v0.0.38) to 25.11 (v0.0.39 to
// v0.0.44), polls it into an in-memory snapshot that scheduling reads
// without I/O, and parses topology.conf for the fabric tree.
package slurm

import (
	"slices"
	"strings"
)

// Base states: exactly one describes a node. Every other state word is a
// flag (DRAIN, NOT_RESPONDING, MAINTENANCE, ...).
func baseStates() []string {
	return []string{
		"INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "EXTERNAL",
	}
}

// knownFlags are the state flags of every supported API version. A word in
// neither list is kept in Node.UnknownStates and reported, never an error.
func knownFlags() []string {
	return []string{
		"RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING", "NOT_RESPONDING",
		"POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "MAINT", "REBOOT_REQUESTED",
		"REBOOT_CANCELED", "POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED",
		"INVALID_REG", "POWER_DOWN", "POWER_UP", "POWER_DRAIN", "DYNAMIC_NORM", "BLOCKED",
		"POWER_DOWN_ASAP", "POWER_DOWN_FORCE", "DRAINING", "DRAINED", "NO_RESPOND",
	}
}

// Node is one Slurm node as sluice needs it.
type Node struct {
	Name string
	// State is the base state, upper case (IDLE, MIXED, ALLOCATED, DOWN...).
	State string
	// Flags are the state flags, upper case (DRAIN, NOT_RESPONDING, ...).
	Flags []string
	// UnknownStates are state words this version of sluice does not know.
	UnknownStates []string
	// Reason is why the node is drained or down, as Slurm records it.
	Reason string
	// Reservation names the reservation the node is in, if any.
	Reservation string
	// GRES and GRESUsed are the configured and allocated generic resources.
	GRES     []GRES
	GRESUsed []GRES
	// Topology are the leaf switches or blocks the node's own answer
	// names, one per topology (v0.0.43 on; "tree:leaf3" gives leaf3).
	Topology []string
	// Unreadable: slurmrestd's entry for the node did not decode (a field
	// of the wrong type); the node is unhealthy, the others are read.
	Unreadable bool
}

// UnreadableState is what View.Unhealthy reports for an unreadable node.
const UnreadableState = "UNREADABLE"

// Has reports whether the node's base state or one of its flags is s
// (upper case; MAINT and MAINTENANCE are the same).
func (n *Node) Has(s string) bool {
	s = canonicalState(s)
	if n.State == s {
		return true
	}
	return slices.Contains(n.Flags, s)
}

// StateString renders the state as sinfo-like text, e.g. "IDLE+DRAIN".
func (n *Node) StateString() string {
	return strings.Join(append([]string{n.State}, n.Flags...), "+")
}

// GPUs returns the node's configured and Slurm-allocated count of a GRES
// name (e.g. "gpu"), summed over types, each at most MaxGRESCount.
func (n *Node) GPUs(name string) (total, used int64) {
	return sumGRES(n.GRES, name), sumGRES(n.GRESUsed, name)
}

// sumGRES sums the counts of name, stopping at MaxGRESCount.
func sumGRES(entries []GRES, name string) int64 {
	var sum int64
	for _, g := range entries {
		if g.Name == name {
			sum += min(g.Count, MaxGRESCount) // both at most 2^30: no overflow
			sum = min(sum, MaxGRESCount)
		}
	}
	return sum
}

func canonicalState(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	switch s {
	case "MAINT":
		return "MAINTENANCE"
	case "NO_RESPOND":
		return "NOT_RESPONDING"
	}
	return s
}

// setStates fills State, Flags and UnknownStates from the words of the
// API: v0.0.37/38 give a lower-case base state and a flags list, v0.0.39 on
// give one list, base state first.
func (n *Node) setStates(words []string) {
	n.State, n.Flags, n.UnknownStates = "", nil, nil
	for _, w := range words {
		w = canonicalState(w)
		switch {
		case w == "":
		case n.State == "" && slices.Contains(baseStates(), w):
			n.State = w
		case slices.Contains(knownFlags(), w) || slices.Contains(baseStates(), w):
			if !slices.Contains(n.Flags, w) {
				n.Flags = append(n.Flags, w)
			}
		default:
			n.UnknownStates = append(n.UnknownStates, w)
		}
	}
	if n.State == "" {
		n.State = "UNKNOWN"
	}
}
