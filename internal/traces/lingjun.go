// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import "io"

// LingjunHost is one host of the Alibaba Lingjun 2023 network topology
// (alibaba_lingjun2023_topo.csv, from the Crux paper, SIGCOMM 2024; columns
// ip,DSW,PSW,ASW): a three-tier fabric of core (DSW), aggregation or pod
// (PSW, the spine) and access (ASW, the leaf or ToR group) switches.
//
// Switch names are local to their parent: leaf "S7" under pod "P8" is not
// leaf "S7" under pod "P10". Use LeafPath to group hosts by leaf.
type LingjunHost struct {
	// IP is the host's anonymised address, a 64-digit hex hash.
	IP string
	// Core is the DSW (core tier) switch, e.g. "G6".
	Core string
	// Pod is the PSW (aggregation, spine) switch, e.g. "P10".
	Pod string
	// Leaf is the ASW (access, leaf) switch group, e.g. "S14", unique only
	// within its Pod.
	Leaf string
}

// LeafPath names the host's leaf uniquely in the fabric as
// "core/pod/leaf", e.g. "G6/P10/S14".
func (h LingjunHost) LeafPath() string { return h.Core + "/" + h.Pod + "/" + h.Leaf }

func lingjunSchema() schema {
	return schema{required: []string{"ip", "DSW", "PSW", "ASW"}}
}

// ReadLingjunTopology reads the Lingjun topology file. Every field must be
// non-empty and every ip unique.
func ReadLingjunTopology(r io.Reader, name string) ([]LingjunHost, error) {
	t, err := newTable(r, name, lingjunSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "ip", func(r *row) LingjunHost {
		return LingjunHost{
			IP:   r.name("ip"),
			Core: r.name("DSW"),
			Pod:  r.name("PSW"),
			Leaf: r.name("ASW"),
		}
	})
}
