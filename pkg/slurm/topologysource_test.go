// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTopologySourceFollowsNodes: from v0.0.43 (Slurm 25.05) each node's
// answer names its leaf switch or block ("topology": "name:unit", one per
// topology, comma separated, as `scontrol update NodeName=.. Topology=`
// and dynamic nodes' --conf set it). The source places a node there, under
// the tree the file gives: a dynamic node the file does not list, and a
// node an admin moved. A unit the file does not define is ignored.
func TestTopologySourceFollowsNodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "topology.conf")
	conf := "SwitchName=leafA Nodes=gpu[01-02]\nSwitchName=leafB Nodes=gpu03\nSwitchName=leafC\nSwitchName=spine Switches=leafA,leafB,leafC\n"
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := NewTopologySource(file, "", []string{"leaf", "spine"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := func(gpu09 string) string {
		return `[{"name":"gpu01","state":["IDLE"],"topology":""},` +
			`{"name":"gpu02","state":["IDLE"],"topology":"racks:b7,tree:leafB"},` +
			`{"name":"gpu03","state":["IDLE"],"topology":"tree:leafZ"},` +
			`{"name":"gpu09","state":["IDLE"],"topology":"` + gpu09 + `"}]`
	}
	fake := &fakeRestd{version: "v0.0.43", nodes: nodes("tree:leafC")}
	cache, ctx := polledCache(t, fake, nil)
	before := src.Version()
	src.FollowNodes(cache)
	if src.Version() == before {
		t.Errorf("Version did not change when the nodes' answers placed them")
	}
	paths := func() map[string][]string {
		out := map[string][]string{}
		for _, n := range []string{"gpu01", "gpu02", "gpu03", "gpu09", "gpu10"} {
			out[n] = src.Switches(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	want := map[string][]string{
		"gpu01": {"leafA", "spine"}, // the file's
		"gpu02": {"leafB", "spine"}, // moved; the block topology's unit is not the file's
		"gpu03": {"leafB", "spine"}, // leafZ is in no file: the file's
		"gpu09": {"leafC", "spine"}, // dynamic, in no file
		"gpu10": {"", ""},           // nowhere
	}
	if diff := cmp.Diff(want, paths()); diff != "" {
		t.Errorf("paths (-want,+got):\n%s", diff)
	}

	// The admin moves gpu09: the next poll that sees it moves it.
	fake.mu.Lock()
	fake.nodes, fake.changedAt = nodes("tree:leafA"), time.Now().Unix()+3600
	fake.mu.Unlock()
	v := src.Version()
	if err := cache.Poll(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	if src.Version() == v {
		t.Errorf("Version did not change when a node moved")
	}
	if got := src.Switches(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu09"}}); !cmp.Equal(got, []string{"leafA", "spine"}) {
		t.Errorf("gpu09 after the move: %v, want [leafA spine]", got)
	}
}
