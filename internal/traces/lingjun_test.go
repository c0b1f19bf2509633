// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"path/filepath"
	"testing"
)

func TestReadLingjunTopology(t *testing.T) {
	runReadCases(t, "topo.csv", ReadLingjunTopology, []readCase[LingjunHost]{
		{
			name:  "columns in another order",
			input: "ASW,PSW,DSW,ip\nS14,P10,G6,h0\nS7,P8,G6,h1\n",
			want: []LingjunHost{
				{IP: "h0", Core: "G6", Pod: "P10", Leaf: "S14"},
				{IP: "h1", Core: "G6", Pod: "P8", Leaf: "S7"},
			},
		},
		{
			name:    "host without a leaf",
			input:   "ip,DSW,PSW,ASW\nh0,G6,P10,\n",
			wantErr: `topo.csv:2: ASW "": empty`,
		},
		{
			name:    "repeated host",
			input:   "ip,DSW,PSW,ASW\nh0,G6,P10,S1\nh0,G6,P10,S2\n",
			wantErr: `topo.csv:3: ip "h0": duplicate, first on line 2`,
		},
		{
			name:    "lower-case header",
			input:   "ip,dsw,psw,asw\nh0,G6,P10,S1\n",
			wantErr: `topo.csv:1: unknown column "dsw" in header (known columns: ip,DSW,PSW,ASW)`,
		},
	})
}

func TestReadLingjunTestdata(t *testing.T) {
	hosts, err := ReadFile(filepath.Join("testdata", "alibaba_lingjun2023_topo.csv"), ReadLingjunTopology)
	if err != nil {
		t.Fatal(err)
	}
	// Leaf S7 appears under each of the three pods; the three are
	// different switches.
	leavesNamedS7 := map[string]bool{}
	for _, h := range hosts {
		if h.Leaf == "S7" {
			leavesNamedS7[h.LeafPath()] = true
		}
	}
	want := map[string]bool{"G6/P8/S7": true, "G6/P10/S7": true, "G6/P12/S7": true}
	if len(leavesNamedS7) != len(want) {
		t.Fatalf("got leaves %v, want %v", leavesNamedS7, want)
	}
	for leaf := range want {
		if !leavesNamedS7[leaf] {
			t.Errorf("leaf %s missing; got %v", leaf, leavesNamedS7)
		}
	}
}
