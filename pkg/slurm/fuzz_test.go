// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fuzz targets check that no input panics or hangs the parsers of
// slurmrestd answers and Slurm configuration; CI runs each briefly
// (make fuzz), and their seeds run with every `go test`.

func FuzzDecodeNodes(f *testing.F) {
	files, _ := filepath.Glob("testdata/responses/*.json")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"nodes":[{"name":"x","state":{"set":true},"gres":"gpu:[1-2]"}],"last_update":{"number":1e99}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, _, _, err := decodeNodes(data)
		if err == nil {
			for _, n := range nodes {
				if n.Name == "" || n.State == "" {
					t.Fatalf("decoded node with empty name or state: %+v", n)
				}
				n.GPUs("gpu")
				n.StateString()
			}
		}
	})
}

func FuzzParseGRES(f *testing.F) {
	for _, s := range []string{"gpu:8", "gpu:h100:3(IDX:0-2)", "gpu:h100:0(IDX:N/A)", "gpu:a:1(S:0)(IDX:1),nvme", "N/A", "gpu:4G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gres, _ := ParseGRES(s)
		for _, g := range gres {
			if g.Count < 0 || g.Name == "" {
				t.Fatalf("ParseGRES(%q) gave %+v", s, g)
			}
		}
	})
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"gpu[01-16,20]", "a,b[1-2]c[3-4]", "x[0-0]", "[1-2]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err == nil && len(names) > maxHostlist {
			t.Fatalf("ExpandHostlist(%q) gave %d names", s, len(names))
		}
	})
}

func FuzzParseTopologyConf(f *testing.F) {
	f.Add("SwitchName=l1 Nodes=gpu[01-04]\nSwitchName=s Switches=l[1-1]\n")
	f.Add("SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[01-04]\n")
	f.Add("BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8\n")
	f.Fuzz(func(t *testing.T, s string) {
		topo, err := ParseTopologyConf(strings.NewReader(s))
		if err == nil {
			topo.Paths(3)
		}
	})
}
