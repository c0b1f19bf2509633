// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmnodestate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/requeue"
	"github.com/sluice-sched/sluice/pkg/slurm"
)

// restd serves a fixture of Slurm 22.05 (v0.0.38) and can be made to fail.
type restd struct {
	mu   sync.Mutex
	body []byte
	down bool
}

func (r *restd) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	_, _ = w.Write(r.body)
}

// newPlugin builds the plugin over a fake slurmrestd serving the fixture
// (gpu01 MIXED with 2 of 8 GPUs in jobs, gpu04 IDLE+DRAIN "maintenance",
// gpu05 DOWN, gpu06 MIXED+DRAIN, gpu07 IDLE, gpu08 DOWN+NOT_RESPONDING).
// fixture is a plugin over a fake slurmrestd, with what tests turn.
type fixture struct {
	pl    *SlurmNodeState
	restd *restd
	clock *testingclock.FakePassiveClock
	cache *slurm.Cache
	act   *activator
}

func newPlugin(t *testing.T, mode config.SlurmFailureMode, maxStaleness time.Duration) fixture {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "slurm", "testdata", "responses", "slurm-nodes-v0.0.38.json"))
	if err != nil {
		t.Fatal(err)
	}
	fake := &restd{body: body}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := slurm.NewClient(slurm.ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakePassiveClock(time.Now())
	cache := slurm.NewCache(client, slurm.CacheConfig{Interval: time.Hour, Clock: clk})
	if err := cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	view := slurm.NewView(cache, slurm.ViewConfig{
		MaxAge: maxStaleness, FailOpen: mode == config.SlurmFailOpen,
		UnhealthyStates: []string{"DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "MAINTENANCE"},
		NodeNameLabel:   "slurm.example/name", SharedNodeLabel: "sluice.dev/slurm-shared", ManagedNodeLabel: "sluice.dev/slurm-managed",
		GRESName: "gpu", GPUResource: "nvidia.com/gpu",
	})
	act := &activator{}
	pl := &SlurmNodeState{view: view, rejected: requeue.NewWaiting(act)}
	view.OnChange(func() { pl.rejected.ActivateAll(klog.Background(), "test") })
	return fixture{pl: pl, restd: fake, clock: clk, cache: cache, act: act}
}

func gpuNode(name string, labels ...string) *v1.Node {
	w := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"})
	for i := 0; i+1 < len(labels); i += 2 {
		w = w.Label(labels[i], labels[i+1])
	}
	return w.Obj()
}

func gpuPod(gpus string) *v1.Pod {
	return st.MakePod().Name("p").Namespace("ns").UID("p").Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
}

// filter runs PreFilter and Filter for pod on node (with `running` GPU pods
// already on it) and returns "<code>: <message>".
func filter(t *testing.T, pl *SlurmNodeState, pod *v1.Pod, node *v1.Node, running ...*v1.Pod) string {
	t.Helper()
	state := framework.NewCycleState()
	ctx := klog.NewContext(context.Background(), klog.Background())
	if _, s := pl.PreFilter(ctx, state, pod, nil); s.IsSkip() {
		return "Success"
	} else if !s.IsSuccess() {
		return "PreFilter " + s.Code().String() + ": " + s.Message()
	}
	ni := framework.NewNodeInfo(running...)
	ni.SetNode(node)
	s := pl.Filter(ctx, state, pod, ni)
	if s.IsSuccess() {
		return "Success"
	}
	return s.Code().String() + ": " + s.Message()
}

func TestFilter(t *testing.T) {
	pl := newPlugin(t, config.SlurmFailClosed, time.Minute).pl
	shared := []string{"sluice.dev/slurm-shared", "true"}
	tests := []struct {
		name    string
		node    *v1.Node
		pod     *v1.Pod
		running []*v1.Pod
		want    string
	}{
		{name: "idle", node: gpuNode("gpu07"), pod: gpuPod("8"), want: "Success"},
		{name: "drained, with Slurm's reason", node: gpuNode("gpu04"), pod: gpuPod("1"),
			want: `UnschedulableAndUnresolvable: SlurmNodeUnhealthy: Slurm node gpu04 is IDLE+DRAIN (reason: "maintenance")`},
		{name: "draining", node: gpuNode("gpu06"), pod: gpuPod("1"),
			want: `UnschedulableAndUnresolvable: SlurmNodeUnhealthy: Slurm node gpu06 is MIXED+DRAIN (reason: "drain-while-busy")`},
		{name: "down", node: gpuNode("gpu05"), pod: gpuPod("1"),
			want: `UnschedulableAndUnresolvable: SlurmNodeUnhealthy: Slurm node gpu05 is DOWN (reason: "admin-down")`},
		{name: "not responding", node: gpuNode("gpu08"), pod: gpuPod("1"),
			want: `UnschedulableAndUnresolvable: SlurmNodeUnhealthy: Slurm node gpu08 is DOWN+NOT_RESPONDING (reason: "Not responding")`},
		{name: "mapped by label", node: gpuNode("k8s-node-4", "slurm.example/name", "gpu04"), pod: gpuPod("1"),
			want: `UnschedulableAndUnresolvable: SlurmNodeUnhealthy: Slurm node gpu04 is IDLE+DRAIN (reason: "maintenance")`},
		{name: "not a Slurm node", node: gpuNode("cpu-only"), pod: gpuPod("1"), want: "Success"},
		// An answer that lacks a node its label says is Slurm's (an empty
		// list) does not make it schedulable.
		{name: "labelled as Slurm's, not listed", node: gpuNode("gpu99", "sluice.dev/slurm-managed", "true"), pod: gpuPod("1"),
			want: "UnschedulableAndUnresolvable: SlurmNodeUnlisted: the node is labelled as Slurm's, and Slurm does not list gpu99"},
		// gpu01: Slurm jobs hold 2 of 8 GPUs.
		{name: "shared node: 6 free of 8, pod needs 6", node: gpuNode("gpu01", shared...), pod: gpuPod("6"), want: "Success"},
		{name: "shared node: 6 free of 8, pod needs 7", node: gpuNode("gpu01", shared...), pod: gpuPod("7"),
			want: "Unschedulable: SlurmGPUsHeld: Slurm jobs hold 2 of 8 nvidia.com/gpu on gpu01; 6 free for pods, the pod needs 7"},
		{name: "shared node: Kubernetes pods count too", node: gpuNode("gpu01", shared...), pod: gpuPod("3"),
			running: []*v1.Pod{st.MakePod().Name("r").UID("r").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "4"}).Obj()},
			want:    "Unschedulable: SlurmGPUsHeld: Slurm jobs hold 2 of 8 nvidia.com/gpu on gpu01; 2 free for pods, the pod needs 3"},
		{name: "not shared: Slurm's GPU use is not Kubernetes'", node: gpuNode("gpu01"), pod: gpuPod("8"), want: "Success"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, filter(t, pl, tt.pod, tt.node, tt.running...)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestStaleSnapshot(t *testing.T) {
	for _, tt := range []struct {
		mode      config.SlurmFailureMode
		wantIdle  string
		wantOther string
	}{
		{config.SlurmFailClosed, "UnschedulableAndUnresolvable: SlurmStateStale: failing closed: Slurm's node state is", "Success"},
		{config.SlurmFailOpen, "Success", "Success"},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			f := newPlugin(t, tt.mode, time.Minute)
			pl, fake, clk := f.pl, f.restd, f.clock
			fake.mu.Lock()
			fake.down = true
			fake.mu.Unlock()
			_ = f.cache.Poll(context.Background())
			// Still fresh: the last good snapshot is used.
			if got := filter(t, pl, gpuPod("1"), gpuNode("gpu04")); !strings.Contains(got, "SlurmNodeUnhealthy") {
				t.Errorf("fresh: gpu04 = %q, want the drained state of the last good snapshot", got)
			}
			fresh := pl.view.Generation()
			clk.SetTime(clk.Now().Add(time.Minute + time.Second))
			// Going stale changes NodeExternal's answers: a new generation.
			if pl.view.Generation() == fresh {
				t.Errorf("generation %d unchanged when the snapshot became too old", fresh)
			}
			if got := filter(t, pl, gpuPod("1"), gpuNode("gpu07")); !strings.HasPrefix(got, tt.wantIdle) {
				t.Errorf("stale: gpu07 = %q, want prefix %q", got, tt.wantIdle)
			}
			// A node Slurm does not manage is not affected.
			if got := filter(t, pl, gpuPod("1"), gpuNode("cpu-only")); got != tt.wantOther {
				t.Errorf("stale: cpu-only = %q, want %q", got, tt.wantOther)
			}
			// Failing open, a pod bound meanwhile gets an Event saying so.
			rec := events.NewFakeRecorder(10)
			pl.recorder = rec
			pl.PostBind(context.Background(), nil, gpuPod("1"), "gpu07")
			select {
			case e := <-rec.Events:
				if tt.mode != config.SlurmFailOpen || !strings.Contains(e, "Warning SlurmStateIgnored bound to gpu07 without Slurm's node state (failureMode Open): Slurm's node state is") {
					t.Errorf("stale, %s: event %q", tt.mode, e)
				}
			default:
				if tt.mode == config.SlurmFailOpen {
					t.Error("stale, failing open: no event on the bound pod")
				}
			}
			fake.mu.Lock()
			fake.down = false
			fake.mu.Unlock()
			if err := f.cache.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := filter(t, pl, gpuPod("1"), gpuNode("gpu07")); got != "Success" {
				t.Errorf("recovered: gpu07 = %q", got)
			}
			pl.PostBind(context.Background(), nil, gpuPod("1"), "gpu07")
			if len(rec.Events) != 0 {
				t.Errorf("recovered: event %q on a bound pod", <-rec.Events)
			}
		})
	}
}

func TestScore(t *testing.T) {
	pl := newPlugin(t, config.SlurmFailClosed, time.Minute).pl
	state := framework.NewCycleState()
	pod := gpuPod("1")
	if _, s := pl.PreFilter(context.Background(), state, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.PreScore(context.Background(), state, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	for node, want := range map[string]int64{
		"gpu07":    100, // IDLE
		"cpu-only": 100, // not Slurm's
		"gpu01":    75,  // MIXED, 2 of 8 GPUs in jobs: 100 * 6/8
		"gpu02":    0,   // ALLOCATED
	} {
		ni := framework.NewNodeInfo()
		ni.SetNode(gpuNode(node))
		got, s := pl.Score(context.Background(), state, pod, ni)
		if !s.IsSuccess() || got != want {
			t.Errorf("Score(%s) = %d, %v; want %d", node, got, s, want)
		}
	}
}

// TestRejectedPodsAreRetriedOnChange checks the bookkeeping behind
// requeueing: pods rejected for Slurm reasons are handed to the activator
// when a new snapshot arrives, once; and again when the snapshot becomes
// too old to trust, even if no scheduling cycle looks.
func TestRejectedPodsAreRetriedOnChange(t *testing.T) {
	f := newPlugin(t, config.SlurmFailClosed, time.Minute)
	filter(t, f.pl, gpuPod("1"), gpuNode("gpu04")) // drained: rejected
	f.restd.mu.Lock()
	f.restd.body = []byte(strings.Replace(string(f.restd.body), "maintenance", "maintenance window", 1))
	f.restd.mu.Unlock()
	if err := f.cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.cache.Poll(context.Background()); err != nil { // nothing new
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1}, f.act.calls); diff != "" {
		t.Errorf("pods activated per change (-want,+got):\n%s", diff)
	}
	// Rejected again; then slurmrestd goes down and the state ages past
	// maxStaleness: the next failed poll retries the pod.
	filter(t, f.pl, gpuPod("1"), gpuNode("gpu04"))
	f.restd.mu.Lock()
	f.restd.down = true
	f.restd.mu.Unlock()
	_ = f.cache.Poll(context.Background())
	if diff := cmp.Diff([]int{1}, f.act.calls); diff != "" {
		t.Errorf("a failed poll within maxStaleness retried pods (-want,+got):\n%s", diff)
	}
	f.clock.SetTime(f.clock.Now().Add(2 * time.Minute))
	_ = f.cache.Poll(context.Background())
	if diff := cmp.Diff([]int{1, 1}, f.act.calls); diff != "" {
		t.Errorf("pods activated when the state went stale (-want,+got):\n%s", diff)
	}
}

type activator struct {
	calls []int
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.calls = append(a.calls, len(pods))
}
