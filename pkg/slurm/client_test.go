// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"bytes"
	"context"
	"errors"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeRestd is a slurmrestd for unit tests: it serves one API version,
// checks the token, and answers update_time like slurmrestd 22.05 (304 when
// nothing changed, otherwise everything, or a 500 when told to).
type fakeRestd struct {
	mu          sync.Mutex
	version     string
	token       string
	nodes       string // JSON of the "nodes" list
	changedAt   int64
	fail500     bool   // answer update_time requests with HTTP 500
	body        string // answer everything with this body instead
	hang        bool   // answer nothing until the client gives up
	requests    []string
	tokensSeen  []string
	lastUpdated bool // include last_update (v0.0.40+)
	refuseEpoch bool // refuse update_time in unix seconds, as 24.11's v0.0.40/41 do
	// ctldClock is slurmctld's clock, for diag's req_time (nil: no diag).
	ctldClock func() int64
}

// refusedEpoch is slurmrestd 24.11.5's answer (HTTP 500) to a v0.0.41
// nodes request with update_time in unix seconds, from
// ../shared/data/slurm/live-24.11/update-time-epoch-nodes-v0.0.41-http500.json
// (meta and warnings left out).
const refusedEpoch = `{"errors":[{"description":"Parsing of 1796114327 for timestamp failed","error_number":9202,"error":"Unable to convert Data type","source":"#/update_time/"},` +
	`{"description":"Rejecting request. Failure parsing query.","error_number":9000,"error":"Query empty or not RFC7320 compliant","source":"_dump_nodes"}],"warnings":[]}`

func (f *fakeRestd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.URL.RequestURI())
	f.tokensSeen = append(f.tokensSeen, r.Header.Get("X-SLURM-USER-TOKEN"))
	if f.hang {
		<-r.Context().Done()
		// No answer at all: an empty 200 written as the client gives up
		// can reach it first (seen: 6 in 400 runs read it as garbage).
		panic(http.ErrAbortHandler)
	}
	if f.token != "" && r.Header.Get("X-SLURM-USER-TOKEN") != f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"error":"Authentication failure","errno":-1}]}`))
		return
	}
	if f.body != "" {
		_, _ = w.Write([]byte(f.body))
		return
	}
	if r.URL.Path == "/openapi/v3" {
		_, _ = w.Write([]byte(`{"openapi":"3.0.3","paths":{"/slurm/v0.0.36/nodes":{},"/slurm/` + f.version + `/nodes` +
			map[bool]string{true: "/", false: ""}[f.version >= "v0.0.40"] + `":{},"/slurm/v0.0.99/nodes/":{}}}`))
		return
	}
	if r.URL.Path == "/slurm/"+f.version+"/diag" && f.ctldClock != nil {
		_, _ = w.Write([]byte(`{"statistics":{"req_time":` + itoa(f.ctldClock()) + `}}`))
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/slurm/"+f.version+"/nodes") {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if ut := r.URL.Query().Get("update_time"); ut != "" {
		if f.refuseEpoch {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(refusedEpoch))
			return
		}
		if f.fail500 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"errors":[{"error":"Unspecified error","errno":-1}],"nodes":[]}`))
			return
		}
		if since, _ := strconv.ParseInt(ut, 10, 64); since >= f.changedAt {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	lu := ""
	if f.lastUpdated {
		lu = `,"last_update":{"set":true,"infinite":false,"number":` + itoa(f.changedAt) + `}`
	}
	_, _ = w.Write([]byte(`{"meta":{},"errors":[],"nodes":` + f.nodes + lu + `}`))
}

// polledCache is a cache over fake (clock nil: the real one), polled once.
func polledCache(t *testing.T, fake *fakeRestd, clock clock.PassiveClock) (*Cache, context.Context) {
	t.Helper()
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, User: "root", TokenFile: writeToken(t, t.TempDir(), "t")})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(c, CacheConfig{Interval: time.Hour, Clock: clock})
	ctx := context.Background()
	if err := cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	return cache, ctx
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func writeToken(t *testing.T, dir, token string) string {
	t.Helper()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

const twoNodes = `[{"name":"gpu01","state":["IDLE"],"gres":"gpu:8","gres_used":"gpu:0"},{"name":"gpu02","state":["MIXED","DRAIN"],"reason":"ECC","gres":"gpu:8","gres_used":"gpu:6(IDX:0-5)"}]`

func TestClientDiscoversAndPollsChanges(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.42", token: "secret", nodes: twoNodes, changedAt: 1000, lastUpdated: true}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, User: "root", TokenFile: writeToken(t, t.TempDir(), "secret")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Nodes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version() != "v0.0.42" || len(res.Nodes) != 2 || res.LastUpdate != 1000 {
		t.Fatalf("version %s, %d nodes, last_update %d", c.Version(), len(res.Nodes), res.LastUpdate)
	}
	// Nothing changed since last_update: 304, nothing downloaded.
	res, err = c.Nodes(ctx, 1000)
	if err != nil || !res.NotModified {
		t.Fatalf("Nodes(since 1000) = %+v, %v; want not modified", res, err)
	}
	want := []string{"/openapi/v3", "/slurm/v0.0.42/nodes/", "/slurm/v0.0.42/nodes/?update_time=1000"}
	if strings.Join(fake.requests, " ") != strings.Join(want, " ") {
		t.Errorf("requests %v, want %v", fake.requests, want)
	}
}

// TestDrainSeenAcrossNotModified: slurmctld's clock is 30 s behind the
// scheduler's. After a 304, the next poll still asks for changes since
// slurmctld's own last_update, so a drain slurmctld records a moment later
// is seen at the next poll (asking since the scheduler's clock missed it
// until the full refresh, minutes later, while every poll "succeeded").
// APIs without last_update (v0.0.38, v0.0.39) ask since slurmctld's clock
// as its diag reports it (req_time), not since the scheduler's.
func TestDrainSeenAcrossNotModified(t *testing.T) {
	for _, version := range []string{"v0.0.42", "v0.0.38"} {
		t.Run(version, func(t *testing.T) {
			nodes, drained := twoNodes, strings.Replace(twoNodes, `"state":["IDLE"]`, `"state":["IDLE","DRAIN"],"reason":"xid 79"`, 1)
			if version == "v0.0.38" {
				nodes = `[{"name":"gpu01","state":"idle","state_flags":[]},{"name":"gpu02","state":"idle","state_flags":[]}]`
				drained = strings.Replace(nodes, `"state_flags":[]`, `"state_flags":["DRAIN"],"reason":"xid 79"`, 1)
			}
			clock := testingclock.NewFakeClock(time.Unix(1030, 0)) // 30 s ahead of slurmctld
			fake := &fakeRestd{version: version, nodes: nodes, changedAt: 1000, lastUpdated: version >= "v0.0.40",
				ctldClock: func() int64 { return clock.Now().Unix() - 30 }}
			cache, ctx := polledCache(t, fake, clock)
			clock.Step(10 * time.Second)
			if err := cache.Poll(ctx); err != nil { // 304: nothing changed
				t.Fatal(err)
			}
			clock.Step(10 * time.Second)
			fake.mu.Lock()
			fake.nodes = drained
			fake.changedAt = fake.ctldClock() // now, by slurmctld's clock
			fake.mu.Unlock()
			if err := cache.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			snap, _, _ := cache.Snapshot()
			if got := snap.Nodes["gpu01"]; got == nil || got.StateString() != "IDLE+DRAIN" {
				t.Errorf("gpu01 after the drain: %v, want IDLE+DRAIN seen at the next poll; requests %v", got, fake.requests)
			}
		})
	}
}

func TestCacheRetriesFullWhenChangedSinceFails(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.38", nodes: `[{"name":"gpu01","state":"idle","state_flags":[]}]`, changedAt: 1, fail500: true}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: writeToken(t, t.TempDir(), "t")})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(c, CacheConfig{Interval: time.Hour})
	ctx := context.Background()
	if err := cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.nodes = `[{"name":"gpu01","state":"idle","state_flags":["DRAIN"],"reason":"bad gpu"}]`
	fake.mu.Unlock()
	if err := cache.Poll(ctx); err != nil {
		t.Fatalf("second poll: %v", err)
	}
	snap, _, _ := cache.Snapshot()
	if got := snap.Nodes["gpu01"]; got.StateString() != "IDLE+DRAIN" || got.Reason != "bad gpu" {
		t.Errorf("after the fallback full fetch gpu01 = %s %q", got.StateString(), got.Reason)
	}
	nodes := slices.DeleteFunc(slices.Clone(fake.requests), func(r string) bool { return strings.HasSuffix(r, "/diag") })
	if n := len(nodes); n != 3 || !strings.Contains(nodes[1], "update_time=") || strings.Contains(nodes[2], "update_time") {
		t.Errorf("node requests %v, want full, changed-since (500), full", nodes)
	}
}

func TestTokenFileIsReadAgainWhenItChanges(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.40", token: "one", nodes: twoNodes}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	file := writeToken(t, dir, "SLURM_JWT=one")
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.40", TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.token = "two"
	fake.mu.Unlock()
	_, err = c.Nodes(context.Background(), 0)
	if Kind(err) != ErrKindAuth || strings.Contains(err.Error(), "one") {
		t.Fatalf("with a stale token: err %v (kind %s); want an auth error that does not show the token", err, Kind(err))
	}
	// Rotate the file (a new size, and an mtime set later than the last
	// read's, as a real rotation some time after would have).
	if err := os.WriteFile(file, []byte("two-rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.token = "two-rotated"
	fake.mu.Unlock()
	if _, err := c.Nodes(context.Background(), 0); err != nil {
		t.Fatalf("after rotating the token file: %v", err)
	}
}

func TestUnixSocketAndTLS(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.38", nodes: twoNodes}
	sock := filepath.Join(t.TempDir(), "restd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: fake}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	c, err := NewClient(ClientConfig{Endpoint: "unix://" + sock, APIVersion: "v0.0.38"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Nodes(context.Background(), 0); err != nil || len(res.Nodes) != 2 {
		t.Fatalf("over the socket: %d nodes, %v", len(res.Nodes), err)
	}

	tlsSrv := httptest.NewTLSServer(&fakeRestd{version: "v0.0.44", token: "x", nodes: twoNodes})
	defer tlsSrv.Close()
	token := writeToken(t, t.TempDir(), "x")
	c, err = NewClient(ClientConfig{Endpoint: tlsSrv.URL, APIVersion: "v0.0.44", TokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes(context.Background(), 0); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, caFile, tlsSrv)
	c, err = NewClient(ClientConfig{Endpoint: tlsSrv.URL, APIVersion: "v0.0.44", TokenFile: token, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Nodes(context.Background(), 0); err != nil || len(res.Nodes) != 2 {
		t.Fatalf("over TLS with the CA: %d nodes, %v", len(res.Nodes), err)
	}
}

func TestFailuresAreClassified(t *testing.T) {
	tests := []struct {
		name string
		fake *fakeRestd
		kind string
	}{
		{"garbage", &fakeRestd{version: "v0.0.38", body: "<html>proxy error</html>"}, ErrKindGarbage},
		{"slow", &fakeRestd{version: "v0.0.38", nodes: twoNodes, hang: true}, ErrKindTimeout},
		{"no such version", &fakeRestd{version: "v0.0.41", nodes: twoNodes}, ErrKindConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(tt.fake)
			defer srv.Close()
			c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: writeToken(t, t.TempDir(), "t"), Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Nodes(context.Background(), 0)
			if err == nil || Kind(err) != tt.kind {
				t.Fatalf("err %v (kind %s), want kind %s", err, Kind(err), tt.kind)
			}
		})
	}
	// Down: nothing listens.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c, _ := NewClient(ClientConfig{Endpoint: "https://" + addr, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: writeToken(t, t.TempDir(), "t")})
	if _, err := c.Nodes(context.Background(), 0); Kind(err) != ErrKindUnreachable {
		t.Errorf("down: err %v kind %s", err, Kind(err))
	}
}

func TestNewClientRejectsBadConfig(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{Endpoint: ""},
		{Endpoint: "slurm:6820"},
		{Endpoint: "ftp://x"},
		{Endpoint: "http://x:6820"}, // no token file
		{Endpoint: "unix://"},
		{Endpoint: "unix:///s", APIVersion: "v0.0.36"},
		{Endpoint: "https://x", TokenFile: "/t", CAFile: "/does/not/exist"},
	} {
		if _, err := NewClient(cfg); err == nil {
			t.Errorf("NewClient(%+v) succeeded", cfg)
		}
	}
}

func TestCacheKeepsLastGoodSnapshot(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.38", nodes: `[{"name":"gpu01","state":"idle"}]`}
	srv := httptest.NewTLSServer(fake)
	defer srv.Close()
	c, _ := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: writeToken(t, t.TempDir(), "t")})
	cache := NewCache(c, CacheConfig{Interval: time.Hour})
	var changes, failures int
	cache.OnChange(func(prev, cur *Snapshot) {
		if cur == nil {
			failures++
		} else {
			changes++
		}
	})
	ctx := context.Background()
	if err := cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.body = "garbage"
	fake.mu.Unlock()
	err := cache.Poll(ctx)
	snap, age, lastErr := cache.Snapshot()
	if err == nil || lastErr == nil || snap == nil || snap.Nodes["gpu01"] == nil {
		t.Fatalf("after a bad poll: err %v, lastErr %v, snapshot %v", err, lastErr, snap)
	}
	if age < 0 || changes != 1 || failures != 1 {
		t.Errorf("age %v, %d change and %d failure notifications, want 1 and 1", age, changes, failures)
	}
	if !errors.As(err, new(*RequestError)) {
		t.Errorf("err %T, want *RequestError", err)
	}
}

// TestAnswersNotTakenAtFaceValue: an answer with errors[] (whatever list
// comes with it) and a list that shrinks at once are failed polls that
// keep the last good snapshot; a shrink a second answer confirms is
// taken; one node with a field of the wrong type is kept as unreadable
// (unhealthy) and costs the others nothing.
func TestAnswersNotTakenAtFaceValue(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.42", nodes: twoNodes, changedAt: 1000, lastUpdated: true}
	cache, ctx := polledCache(t, fake, nil)
	answer := func(body string) error {
		fake.mu.Lock()
		fake.body = body
		fake.mu.Unlock()
		return cache.Poll(ctx)
	}
	nodes := func() []string {
		snap, _, _ := cache.Snapshot()
		var out []string
		for name, n := range snap.Nodes {
			out = append(out, name+"="+n.StateString())
		}
		sort.Strings(out)
		return out
	}
	want := []string{"gpu01=IDLE", "gpu02=MIXED+DRAIN"}

	err := answer(`{"nodes":[],"errors":[{"error":"Unable to query nodes","error_number":1007}]}`)
	if err == nil || !strings.Contains(err.Error(), "Unable to query nodes") {
		t.Errorf("errors[] with an empty list: poll error %v, want one naming slurmrestd's error", err)
	}
	if got := nodes(); !slices.Equal(got, want) {
		t.Errorf("after errors[]: snapshot %v, want the last good %v", got, want)
	}

	one := `{"nodes":[{"name":"gpu01","state":["IDLE"],"gres":"gpu:8","gres_used":"gpu:0"}],"errors":[]}`
	if err := answer(one); err == nil || !strings.Contains(err.Error(), "missing: gpu02") {
		t.Errorf("a shrunk list: poll error %v, want one naming gpu02", err)
	}
	if got := nodes(); !slices.Equal(got, want) {
		t.Errorf("after one shrunk answer: snapshot %v, want the last good %v", got, want)
	}
	if err := answer(one); err != nil {
		t.Errorf("the same shrunk list again: %v, want it taken", err)
	}
	if got := nodes(); !slices.Equal(got, []string{"gpu01=IDLE"}) {
		t.Errorf("after two agreeing answers: snapshot %v, want gpu01 only", got)
	}

	// Nodes deleted one poll after another (a scale-in) never fail two
	// polls in a row: each node goes once two answers lack it.
	list := func(names ...string) string {
		var items []string
		for _, n := range names {
			items = append(items, `{"name":"`+n+`","state":["IDLE"]}`)
		}
		return `{"nodes":[` + strings.Join(items, ",") + `],"errors":[]}`
	}
	if err := answer(list("gpu01", "n1", "n2", "n3")); err != nil {
		t.Fatal(err)
	}
	if err := answer(list("gpu01", "n1", "n2", "n3")); err != nil {
		t.Fatal(err)
	}
	results := []bool{}
	for _, body := range []string{list("n1", "n2", "n3"), list("n2", "n3"), list("n3"), list("n3")} {
		results = append(results, answer(body) == nil)
	}
	if diff := cmp.Diff([]bool{false, true, false, true}, results); diff != "" {
		t.Errorf("polls taken during a scale-in (-want,+got):\n%s", diff)
	}
	if got := nodes(); !slices.Equal(got, []string{"n3=IDLE"}) {
		t.Errorf("after the scale-in: snapshot %v, want n3 only", got)
	}

	// gpu02's reason is a number: only gpu02 is unreadable.
	typed := `{"nodes":[{"name":"gpu01","state":["IDLE"],"gres":"gpu:8","gres_used":"gpu:0"},{"name":"gpu03","state":["IDLE"],"reason":17},{"name":"n3","state":["IDLE"]}],"errors":[]}`
	if err := answer(typed); err != nil {
		t.Fatalf("one node with a wrongly typed field: %v, want the others read", err)
	}
	snap, _, _ := cache.Snapshot()
	view := NewView(cache, ViewConfig{MaxAge: time.Minute, UnhealthyStates: []string{"DRAIN"}, GRESName: "gpu"})
	if n := snap.Nodes["gpu01"]; n == nil || view.Unhealthy(n) != "" {
		t.Errorf("gpu01 = %+v, want read and healthy", n)
	}
	if n := snap.Nodes["gpu03"]; n == nil || view.Unhealthy(n) != UnreadableState || !strings.Contains(n.Reason, "could not read") {
		t.Errorf("gpu03 = %+v, want kept as unreadable and unhealthy", n)
	}
}

// TestGRESChangesAreChanges: a change of any GRES is a change of the
// snapshot, whatever gresName counts: with gresName shard, Slurm's jobs
// taking shards were missed because only "gpu" was compared.
func TestGRESChangesAreChanges(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.42", nodes: `[{"name":"gpu01","state":["MIXED"],"gres":"shard:8","gres_used":"shard:0"}]`, changedAt: 1000, lastUpdated: true}
	cache, ctx := polledCache(t, fake, nil)
	fake.mu.Lock()
	fake.nodes, fake.changedAt = `[{"name":"gpu01","state":["MIXED"],"gres":"shard:8","gres_used":"shard:6"}]`, 1010
	fake.mu.Unlock()
	if err := cache.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _, _ := cache.Snapshot()
	if _, used := snap.Nodes["gpu01"].GPUs("shard"); used != 6 {
		t.Errorf("shards in use after Slurm's jobs took 6: %d, want 6", used)
	}
}

// TestUnknownStateLoggedOnce: a state word this version does not know is
// logged at the default level once, naming a node, however many polls
// and nodes show it.
func TestUnknownStateLoggedOnce(t *testing.T) {
	nodes := `[{"name":"gpu01","state":["IDLE","SHINY_NEW"],"gres":"gpu:8","gres_used":"gpu:0"},{"name":"gpu02","state":["IDLE","SHINY_NEW"],"gres":"gpu:8","gres_used":"gpu:0"}]`
	fake := &fakeRestd{version: "v0.0.42", nodes: nodes, changedAt: 1000, lastUpdated: true}
	var buf bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf), textlogger.Verbosity(0)))
	ctx := klog.NewContext(context.Background(), logger)
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, User: "root", TokenFile: writeToken(t, t.TempDir(), "t")})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(c, CacheConfig{Interval: time.Hour})
	for range 3 {
		fake.mu.Lock()
		fake.changedAt++ // a changed answer each time
		fake.mu.Unlock()
		if err := cache.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), `state="SHINY_NEW"`); n != 1 {
		t.Errorf("the unknown state was logged %d times, want once:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), `node="gpu01"`) && !strings.Contains(buf.String(), `node="gpu02"`) {
		t.Errorf("the log line names no node:\n%s", buf.String())
	}
}

// TestUnixUpdateTimeRefused: slurmrestd 24.11 refuses update_time in unix
// seconds on v0.0.40 and v0.0.41 (HTTP 500, error 9202). The first
// refusal is read as such: that poll reads every node, and later polls
// ask for every node at once instead of failing first, every time.
func TestUnixUpdateTimeRefused(t *testing.T) {
	fake := &fakeRestd{version: "v0.0.41", nodes: twoNodes, changedAt: 1000, lastUpdated: true, refuseEpoch: true}
	cache, ctx := polledCache(t, fake, nil)
	for range 3 {
		if err := cache.Poll(ctx); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var withTime int
	for _, r := range fake.requests {
		if strings.Contains(r, "update_time=") {
			withTime++
		}
	}
	if withTime != 1 {
		t.Errorf("requests %v: %d with update_time, want 1 (refused once, then never sent)", fake.requests, withTime)
	}
	if snap, _, _ := cache.Snapshot(); snap == nil || len(snap.Nodes) != 2 {
		t.Errorf("snapshot %+v, want both nodes", snap)
	}
}
