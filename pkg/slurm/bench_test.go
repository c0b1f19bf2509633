// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// pollNodes is the size of the cluster the poll benchmarks read.
const pollNodes = 5000

// manyNodes is a /nodes answer of pollNodes nodes, each a copy of the
// first node of a real answer (fixture) renamed node00001...
func manyNodes(b *testing.B, fixture string) []byte {
	b.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		b.Fatal(err)
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(data, &resp); err != nil {
		b.Fatal(err)
	}
	var nodes []map[string]json.RawMessage
	if err := json.Unmarshal(resp["nodes"], &nodes); err != nil || len(nodes) == 0 {
		b.Fatalf("%s: no nodes (%v)", fixture, err)
	}
	out := make([]map[string]json.RawMessage, pollNodes)
	for i := range out {
		n := make(map[string]json.RawMessage, len(nodes[0]))
		for k, v := range nodes[0] {
			n[k] = v
		}
		name, _ := json.Marshal(fmt.Sprintf("node%05d", i+1))
		n["name"], n["hostname"] = name, name
		out[i] = n
	}
	resp["nodes"], _ = json.Marshal(out)
	body, err := json.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

var pollFixtures = []struct{ version, file string }{
	{"v0.0.38", "testdata/responses/slurm-nodes-v0.0.38.json"},
	{"v0.0.42", "testdata/responses/node-mixed-v0.0.42-example.json"},
}

// BenchmarkDecodeNodes is the decode of one full /nodes answer of 5,000
// nodes (Slurm 22.05's v0.0.38 and 25.11's v0.0.42): what each full poll
// costs the scheduler besides the request. Run: go test -run '^$' -bench
// 'DecodeNodes|PollNodes' -benchmem -count 5 ./pkg/slurm/
func BenchmarkDecodeNodes(b *testing.B) {
	for _, f := range pollFixtures {
		body := manyNodes(b, f.file)
		b.Run(fmt.Sprintf("%s/%dnodes", f.version, pollNodes), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				nodes, _, _, err := decodeNodes(body)
				if err != nil || len(nodes) != pollNodes {
					b.Fatalf("decoded %d nodes: %v", len(nodes), err)
				}
			}
		})
	}
}

// BenchmarkPollNodes is one full poll of 5,000 nodes through the client
// and the cache (HTTP on loopback, decode, the new snapshot).
func BenchmarkPollNodes(b *testing.B) {
	for _, f := range pollFixtures {
		body := manyNodes(b, f.file)
		b.Run(fmt.Sprintf("%s/%dnodes", f.version, pollNodes), func(b *testing.B) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			token := b.TempDir() + "/token"
			if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
				b.Fatal(err)
			}
			c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: f.version, TokenFile: token, Timeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			// A full refresh at every poll: no changed-since request.
			cache := NewCache(c, CacheConfig{Interval: time.Second, FullRefreshEvery: 1})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := cache.Poll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if snap, _, _ := cache.Snapshot(); snap == nil || len(snap.Nodes) != pollNodes {
				b.Fatal("no snapshot of every node")
			}
		})
	}
}
