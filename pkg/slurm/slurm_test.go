// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// summary is what a test checks of a node: state, reason, GPUs used/total.
type summary struct {
	State     string
	Reason    string
	GPUsUsed  int64
	GPUsTotal int64
}

func summarize(t *testing.T, file string) map[string]summary {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "responses", file))
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, warnings, err := decodeNodes(body)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(warnings) > 0 {
		t.Errorf("%s: warnings %v", file, warnings)
	}
	out := map[string]summary{}
	for _, n := range nodes {
		total, used := n.GPUs("gpu")
		out[n.Name] = summary{n.StateString(), n.Reason, used, total}
	}
	return out
}

// TestDecodeEveryVersionAndState reads real responses of every supported
// API version in every state the shared data has.
func TestDecodeEveryVersionAndState(t *testing.T) {
	tests := []struct {
		file string
		want map[string]summary
	}{
		{"slurm-nodes-v0.0.37.json", map[string]summary{
			"gpu01": {"MIXED", "", 2, 8},
			"gpu02": {"ALLOCATED", "", 8, 8},
			"gpu03": {"ALLOCATED", "", 8, 8},
			"gpu04": {"IDLE+DRAIN", "maintenance", 0, 8},
			"gpu05": {"DOWN", "admin-down", 0, 8},
			"gpu06": {"MIXED+DRAIN", "drain-while-busy", 4, 8},
			"gpu07": {"IDLE", "", 0, 8},
			"gpu08": {"DOWN+NOT_RESPONDING", "Not responding", 0, 8},
		}},
		{"slurm-nodes-v0.0.38.json", map[string]summary{
			"gpu01": {"MIXED", "", 2, 8},
			"gpu02": {"ALLOCATED", "", 8, 8},
			"gpu03": {"ALLOCATED", "", 8, 8},
			"gpu04": {"IDLE+DRAIN", "maintenance", 0, 8},
			"gpu05": {"DOWN", "admin-down", 0, 8},
			"gpu06": {"MIXED+DRAIN", "drain-while-busy", 4, 8},
			"gpu07": {"IDLE", "", 0, 8},
			"gpu08": {"DOWN+NOT_RESPONDING", "Not responding", 0, 8},
		}},
		{"slurm-nodes-v0.0.38-extra-states.json", map[string]summary{
			"gpu01": {"IDLE", "", 0, 8},
			"gpu02": {"IDLE", "", 0, 8},
			"gpu03": {"IDLE+MAINTENANCE+RESERVED", "", 0, 8},
			"gpu04": {"IDLE", "", 0, 8},
			"gpu05": {"IDLE", "", 0, 8},
			"gpu06": {"IDLE+FAIL", "fail-idle", 0, 8},
			"gpu07": {"MIXED+FAIL", "fail-test", 1, 8},
			"gpu08": {"IDLE", "", 0, 8},
		}},
		{"slurm-nodes-v0.0.38-gpu06.json", map[string]summary{"gpu06": {"MIXED+DRAIN", "drain-while-busy", 4, 8}}},
		{"nodes-v0.0.40-example.json", map[string]summary{
			"cn1": {"IDLE+DRAIN", "ECC memory error", 0, 0},
			"cn2": {"MIXED", "", 0, 0},
			"cn3": {"ALLOCATED", "", 0, 0},
			"cn4": {"DOWN", "CPU dead", 0, 0},
			"ia1": {"IDLE", "", 0, 6},
			"ia2": {"IDLE", "", 0, 6},
		}},
		{"node-with-gpus-allocated-v0.0.40-example.json", map[string]summary{"ia2": {"ALLOCATED", "", 6, 6}}},
		{"nodes-v0.0.41-example.json", map[string]summary{
			"cn1": {"IDLE+COMPLETING", "", 0, 0}, "cn2": {"IDLE+DRAIN", "ECC memory error", 0, 0},
			"cn3": {"ALLOCATED", "", 0, 0}, "cn4": {"DOWN", "CPU dead", 0, 0},
			"gpu1": {"IDLE", "", 0, 4}, "gpu2": {"IDLE", "", 0, 4}, "gpu3": {"IDLE", "", 0, 4}, "gpu4": {"IDLE", "", 0, 4},
		}},
		{"node-draining-v0.0.41-example.json", map[string]summary{"cn1": {"MIXED+DRAIN", "ECC memory error", 0, 0}}},
		{"node-planned-v0.0.41-example.json", map[string]summary{"gpu1": {"IDLE+PLANNED", "", 0, 4}}},
		{"node-planned-v0.0.42-example.json", map[string]summary{"gpu1": {"IDLE+COMPLETING+PLANNED", "", 0, 4}}},
		{"node-drain-v0.0.43-example.json", map[string]summary{"cn3": {"IDLE+DRAIN", "ECC memory error", 0, 0}}},
		{"node-down-v0.0.43-example.json", map[string]summary{"cn4": {"DOWN", "CPU dead", 0, 0}}},
		{"nodes-v0.0.44-example.json", map[string]summary{
			"cn1": {"IDLE+DRAIN", "ECC memory error", 0, 0}, "cn2": {"DOWN", "CPU dead", 0, 0},
			"cn3": {"ALLOCATED", "", 0, 0}, "cn4": {"MIXED", "", 0, 0},
			"gpu1": {"IDLE", "", 0, 4}, "gpu2": {"IDLE", "", 0, 4}, "gpu3": {"IDLE", "", 0, 4}, "gpu4": {"IDLE", "", 0, 4},
		}},
		{"node-draining-v0.0.44-example.json", map[string]summary{"cn1": {"MIXED+DRAIN", "ECC memory error", 0, 0}}},
		{"node-with-gpus-allocated-v0.0.44-example.json", map[string]summary{"gpu1": {"ALLOCATED", "", 4, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(t, tt.file)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
	// Every fixture decodes without warnings or unknown states.
	files, _ := filepath.Glob("testdata/responses/*.json")
	for _, f := range files {
		summarize(t, filepath.Base(f))
	}
}

// TestPublishedSchemas checks sluice's reading of each version against the
// OpenAPI document slurmrestd publishes: the path and its update_time
// parameter, string fields, the shape of "state", and that every state word
// the schema allows is one sluice knows.
func TestPublishedSchemas(t *testing.T) {
	files, err := filepath.Glob("testdata/openapi/v0.0.*.json")
	if err != nil || len(files) < 7 {
		t.Fatalf("want the schemas of v0.0.39 to v0.0.45, found %v", files)
	}
	for _, f := range files {
		var doc struct {
			Version        string                              `json:"version"`
			Paths          map[string]json.RawMessage          `json:"paths"`
			NodesResponse  struct{ Properties map[string]any } `json:"nodes_response"`
			NodeProperties map[string]struct {
				Type  string `json:"type"`
				Items struct {
					Enum []string `json:"enum"`
				} `json:"items"`
			} `json:"node_properties"`
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(doc.Version, func(t *testing.T) {
			if !slices.Contains(SupportedVersions(), doc.Version) {
				t.Errorf("%s is published but not in SupportedVersions", doc.Version)
			}
			path := "/slurm/" + doc.Version + "/nodes"
			if doc.Version >= "v0.0.40" {
				path += "/"
			}
			raw, ok := doc.Paths[path]
			if !ok {
				t.Fatalf("the schema has no %s (paths %v)", path, keys(doc.Paths))
			}
			if !strings.Contains(string(raw), `"update_time"`) {
				t.Errorf("%s has no update_time parameter", path)
			}
			for _, field := range []string{"name", "reason", "reservation", "gres", "gres_used"} {
				if got := doc.NodeProperties[field].Type; got != "string" {
					t.Errorf("node.%s is %q, sluice reads a string", field, got)
				}
			}
			state := doc.NodeProperties["state"]
			if state.Type != "array" {
				t.Fatalf("node.state is %q, want array from v0.0.39 on", state.Type)
			}
			for _, w := range state.Items.Enum {
				n := Node{}
				n.setStates([]string{w})
				if len(n.UnknownStates) > 0 {
					t.Errorf("state %q of %s is unknown to sluice", w, doc.Version)
				}
			}
			_, hasLastUpdate := doc.NodesResponse.Properties["last_update"]
			if want := doc.Version >= "v0.0.40"; hasLastUpdate != want {
				t.Errorf("last_update in the envelope: %v, want %v", hasLastUpdate, want)
			}
		})
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestUnknownStatesAreKeptAndReported(t *testing.T) {
	body := []byte(`{"nodes":[{"name":"n1","state":["IDLE","DRAIN","SUPERNOVA"],"gres":"gpu:8","gres_used":"gpu:8(IDX:0-7)"},
		{"name":"n2","state":["WARPING"]}]}`)
	nodes, _, warnings, err := decodeNodes(body)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodes[0]; got.StateString() != "IDLE+DRAIN" || !slices.Equal(got.UnknownStates, []string{"SUPERNOVA"}) {
		t.Errorf("n1 = %s unknown %v", got.StateString(), got.UnknownStates)
	}
	if got := nodes[1]; got.State != "UNKNOWN" || !slices.Equal(got.UnknownStates, []string{"WARPING"}) {
		t.Errorf("n2 = %s unknown %v, want UNKNOWN with WARPING kept", got.StateString(), got.UnknownStates)
	}
	if len(warnings) != 2 {
		t.Errorf("warnings = %v, want one per node with unknown states", warnings)
	}
}

func TestDecodeGarbage(t *testing.T) {
	for _, body := range []string{
		``, `<html>502 Bad Gateway</html>`, `{"meta":{}}`, `{"nodes": 7}`,
		`{"errors":[{"error":"Unspecified error","errno":-1}]}`,
	} {
		if _, _, _, err := decodeNodes([]byte(body)); err == nil {
			t.Errorf("decodeNodes(%q) succeeded, want an error", body)
		}
	}
}

func TestParseGRES(t *testing.T) {
	tests := []struct {
		in      string
		want    []GRES
		wantErr bool
	}{
		{in: "gpu:8", want: []GRES{{Name: "gpu", Count: 8}}},
		{in: "gpu:h100:8", want: []GRES{{Name: "gpu", Type: "h100", Count: 8}}},
		{in: "gpu:h100:3(IDX:0-2)", want: []GRES{{Name: "gpu", Type: "h100", Count: 3, Indexes: "0-2"}}},
		{in: "gpu:h100:0(IDX:N/A)", want: []GRES{{Name: "gpu", Type: "h100", Count: 0, Indexes: "N/A"}}},
		{in: "gpu:2(IDX:0,3)", want: []GRES{{Name: "gpu", Count: 2, Indexes: "0,3"}}},
		{in: "gpu:h100:2(IDX:0-1),gpu:h200:4(IDX:2-5)", want: []GRES{
			{Name: "gpu", Type: "h100", Count: 2, Indexes: "0-1"}, {Name: "gpu", Type: "h200", Count: 4, Indexes: "2-5"}}},
		{in: "gpu:a100:4(S:0-1),nvme:1", want: []GRES{{Name: "gpu", Type: "a100", Count: 4}, {Name: "nvme", Count: 1}}},
		{in: "gpu", want: []GRES{{Name: "gpu", Count: 1}}},
		{in: "gpu:h100", want: []GRES{{Name: "gpu", Type: "h100", Count: 1}}},
		{in: "bandwidth:lustre:4G", want: []GRES{{Name: "bandwidth", Type: "lustre", Count: 4 << 30}}},
		{in: "N/A"}, {in: ""}, {in: "(null)"},
		{in: "gpu:h100:x", wantErr: true},
		{in: "gpu:a:b:c", wantErr: true},
		{in: ":8", wantErr: true},
		{in: "gpu:8),x", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseGRES(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseGRES(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if !tt.wantErr {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseGRES(%q) (-want,+got):\n%s", tt.in, diff)
			}
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "gpu01", want: []string{"gpu01"}},
		{in: "gpu[01-03,20]", want: []string{"gpu01", "gpu02", "gpu03", "gpu20"}},
		{in: "gpu[8-10]", want: []string{"gpu8", "gpu9", "gpu10"}},
		{in: "gpu[098-101]", want: []string{"gpu098", "gpu099", "gpu100", "gpu101"}},
		{in: "a1,b[1-2],c", want: []string{"a1", "b1", "b2", "c"}},
		{in: "r[1-2]n[1-2]", want: []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{in: "leaf[1-2]-ib", want: []string{"leaf1-ib", "leaf2-ib"}},
		{in: "", want: nil},
		{in: "gpu[01-", wantErr: true},
		{in: "gpu[3-1]", wantErr: true},
		{in: "gpu[a-b]", wantErr: true},
		{in: "gpu]", wantErr: true},
		{in: "gpu[1-99999999]", wantErr: true},
		{in: "gpu[0-600000,0-600000]", wantErr: true},
		{in: "n[0-9223372036854775807]", wantErr: true}, // b-a+1 overflows
	}
	for _, tt := range tests {
		got, err := ExpandHostlist(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ExpandHostlist(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if !tt.wantErr {
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExpandHostlist(%q) (-want,+got):\n%s", tt.in, diff)
			}
		}
	}
}

// TestTopologyFromTheLeavesUp: `scontrol show topology -o` lists every
// node under each switch above its leaf too. A node belongs to the lowest
// switch that lists it, whatever the switches are named (an upper switch
// sorting before the leaves flattened the tree: every path [agg agg agg]);
// a node under two switches neither below the other is an error naming
// both, not silently the alphabetically first.
func TestTopologyFromTheLeavesUp(t *testing.T) {
	tests := map[string]struct {
		conf string
		want map[string][]string
	}{
		"agg above the leaves": {`SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[01-02]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[03-04]
SwitchName=agg Level=1 LinkSpeed=1 Nodes=gpu[01-04] Switches=leaf[1-2]
`, map[string][]string{"gpu01": {"leaf1", "agg", "agg"}, "gpu02": {"leaf1", "agg", "agg"}, "gpu03": {"leaf2", "agg", "agg"}, "gpu04": {"leaf2", "agg", "agg"}}},
		"three tiers under core": {`SwitchName=core Level=2 LinkSpeed=1 Nodes=gpu[01-03] Switches=s[1-2]
SwitchName=s1 Level=1 LinkSpeed=1 Nodes=gpu[01-02] Switches=l[1-2]
SwitchName=s2 Level=1 LinkSpeed=1 Nodes=gpu03 Switches=l3
SwitchName=l1 Level=0 LinkSpeed=1 Nodes=gpu01
SwitchName=l2 Level=0 LinkSpeed=1 Nodes=gpu02
SwitchName=l3 Level=0 LinkSpeed=1 Nodes=gpu03
`, map[string][]string{"gpu01": {"l1", "s1", "core"}, "gpu02": {"l2", "s1", "core"}, "gpu03": {"l3", "s2", "core"}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			topo, err := ParseTopologyConf(strings.NewReader(tt.conf))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, topo.Paths(3)); diff != "" {
				t.Errorf("paths (-want,+got):\n%s", diff)
			}
		})
	}
	_, err := ParseTopologyConf(strings.NewReader("SwitchName=leafA Nodes=gpu[01-02]\nSwitchName=leafB Nodes=gpu[02-03]\nSwitchName=top Switches=leafA,leafB\n"))
	if err == nil || !strings.Contains(err.Error(), `"gpu02"`) || !strings.Contains(err.Error(), `"leafA"`) || !strings.Contains(err.Error(), `"leafB"`) {
		t.Errorf("a node under two leaves: %v, want an error naming gpu02, leafA and leafB", err)
	}
}

// TestTopologyContinuationLines: a long switch line continued with '\',
// as large sites write topology.conf, with comments on the way.
func TestTopologyContinuationLines(t *testing.T) {
	conf := "SwitchName=leaf1 \\\n  Nodes=gpu[01-02] # the first rack\n" +
		"SwitchName=leaf2 Nodes=gpu03,\\\ngpu04\n" +
		"# the spine\nSwitchName=spine Switches=leaf[1-2]\n"
	topo, err := ParseTopologyConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"gpu01": {"leaf1", "spine"}, "gpu02": {"leaf1", "spine"}, "gpu03": {"leaf2", "spine"}, "gpu04": {"leaf2", "spine"}}
	if diff := cmp.Diff(want, topo.Paths(2)); diff != "" {
		t.Errorf("paths (-want,+got):\n%s", diff)
	}
	if _, err := ParseTopologyConf(strings.NewReader("SwitchName=a \\\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a continuation at the end of the file: %v, want an error naming line 1", err)
	}
}

// TestBlockTopology: topology/block (NVL72 racks as blocks) becomes
// levels: the blocks, then each aggregated block size over consecutive
// blocks in the order they are defined, as Slurm aggregates them; the
// same from `scontrol show topology` output (Slurm 24.11, as seen in
// ../shared/reference/slurm-24.11/NOTES.md).
func TestBlockTopology(t *testing.T) {
	conf := `# four NVL racks of 4 nodes
BlockName=block1 Nodes=gpu[01-04]
BlockName=block2 Nodes=gpu[05-08]
BlockName=block3 Nodes=gpu[09-12]
BlockName=block4 Nodes=gpu[13-16]
BlockSizes=4,8,16
`
	topo, err := ParseTopologyConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	paths := topo.Paths(3)
	for node, want := range map[string][]string{
		"gpu01": {"block1", "block1-block2", "block1-block4"},
		"gpu08": {"block2", "block1-block2", "block1-block4"},
		"gpu09": {"block3", "block3-block4", "block1-block4"},
	} {
		if diff := cmp.Diff(want, paths[node]); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", node, diff)
		}
	}
	scontrol := `BlockName=block1 BlockIndex=0 Nodes=gpu[01-04] BlockSize=4
BlockName=block2 BlockIndex=1 Nodes=gpu[05-08] BlockSize=4
AggregatedBlock=block[1-2] BlockIndex=0 Nodes=gpu[01-08] BlockSize=8
`
	topo, err = ParseTopologyConf(strings.NewReader(scontrol))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"block2", "block1-block2"}, topo.Paths(2)["gpu05"]); diff != "" {
		t.Errorf("scontrol gpu05 (-want,+got):\n%s", diff)
	}
	// Sizes beyond what the blocks make add no level.
	topo, err = ParseTopologyConf(strings.NewReader("BlockName=r1 Nodes=n[1-2]\nBlockName=r2 Nodes=n[3-4]\nBlockName=r3 Nodes=n[5-6]\nBlockSizes=2,4,8,16"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"n1": {"r1", "r1-r2", "r1-r3"}, "n5": {"r3", "r3@4", "r1-r3"}},
		map[string][]string{"n1": topo.Paths(3)["n1"], "n5": topo.Paths(3)["n5"]}); diff != "" {
		t.Errorf("three blocks, sizes to 16 (-want,+got):\n%s", diff)
	}
	for _, bad := range []string{
		"SwitchName=s Nodes=a\nBlockName=b Nodes=c",   // tree and block in one file
		"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,6",   // not a multiple
		"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,8,8", // does not grow
		"BlockName=b1 Nodes=n[1-4]\nBlockSizes=2",     // base smaller than a block
		"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x",   // not a number
		"BlockSizes=4", // no blocks
		"BlockName=b1 Nodes=n[1-4]\nBlockName=b1 Nodes=n[5-8]", // defined twice
	} {
		if _, err := ParseTopologyConf(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseTopologyConf(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseTopology(t *testing.T) {
	conf := `# three tiers
SwitchName=leaf1 Nodes=gpu[01-02] LinkSpeed=100
switchname=leaf2 nodes=gpu[03-04]
SwitchName=leaf3 Nodes=gpu05
SwitchName=spine1 Switches=leaf[1-2]
SwitchName=spine2 Switches=leaf3
SwitchName=core Switches=spine[1-2]
`
	// `scontrol show topology -o` of the live test cluster (Slurm 22.05).
	scontrol := `SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[01-04]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[05-08]
SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu[01-08] Switches=leaf[1-2]
`
	topo, err := ParseTopologyConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	paths := topo.Paths(3)
	want := map[string][]string{
		"gpu01": {"leaf1", "spine1", "core"}, "gpu02": {"leaf1", "spine1", "core"},
		"gpu03": {"leaf2", "spine1", "core"}, "gpu04": {"leaf2", "spine1", "core"},
		"gpu05": {"leaf3", "spine2", "core"},
	}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("topology.conf paths (-want,+got):\n%s", diff)
	}
	topo, err = ParseTopologyConf(strings.NewReader(scontrol))
	if err != nil {
		t.Fatal(err)
	}
	// Two tiers read as three levels: the top switch fills the block level.
	paths = topo.Paths(3)
	if diff := cmp.Diff([]string{"leaf1", "spine", "spine"}, paths["gpu03"]); diff != "" {
		t.Errorf("scontrol gpu03 path (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"leaf2", "spine", "spine"}, paths["gpu07"]); diff != "" {
		t.Errorf("scontrol gpu07 path (-want,+got):\n%s", diff)
	}
	for _, bad := range []string{
		"Nodes=gpu01",                                      // no SwitchName
		"SwitchName=a Nodes=gpu[01-",                       // bad hostlist
		"SwitchName=a Switches=b",                          // undefined switch
		"SwitchName=a Switches=b\nSwitchName=b Switches=a", // cycle
		"SwitchName=a Nodes=x\nSwitchName=a Nodes=y",       // defined twice
		"SwitchName=a garbage",                             // not KEY=VALUE
		// Each line under the hostlist cap, the file over it.
		"SwitchName=a Nodes=n[0-600000]\nSwitchName=b Nodes=m[0-600000]",
	} {
		if _, err := ParseTopologyConf(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseTopologyConf(%q) succeeded, want an error", bad)
		}
	}
}

// TestHostlistBracketGroupsBounded: a name of many bracket groups (one
// name each) is refused at once: every group copied the names of the
// groups after it, quadratic in their number. Slurm's hostlists have at
// most five dimensions.
func TestHostlistBracketGroupsBounded(t *testing.T) {
	got, err := ExpandHostlist("r[1-2]a[1]b[1]c[1]d[1]")
	if err != nil || len(got) != 2 || got[1] != "r2a1b1c1d1" {
		t.Errorf("five groups: %v, %v; want r1a1b1c1d1 r2a1b1c1d1", got, err)
	}
	if _, err := ExpandHostlist(strings.Repeat("n[1]", 20000)); err == nil || !strings.Contains(err.Error(), "bracket groups") {
		t.Errorf("20,000 bracket groups in one name: %v, want an error saying so", err)
	}
}

// TestGPUCountsAreBounded: GRES counts of a node that would overflow when
// summed (garbage from a buggy or hostile slurmrestd) give a bounded,
// positive count, not a negative one.
func TestGPUCountsAreBounded(t *testing.T) {
	gres, err := ParseGRES("gpu:a:9223372036854775807,gpu:b:9223372036854775807")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{GRES: gres, GRESUsed: gres}
	total, used := n.GPUs("gpu")
	if total <= 0 || used <= 0 || total > MaxGRESCount || used > MaxGRESCount {
		t.Errorf("GPUs = %d, %d; want each in (0, %d]", total, used, MaxGRESCount)
	}
}
