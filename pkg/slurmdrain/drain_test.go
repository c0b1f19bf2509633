// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmdrain

import (
	"context"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/sluice-sched/sluice/pkg/slurm"
)

// restd serves a v0.0.42 node list the test sets.
type restd struct {
	mu    sync.Mutex
	nodes string
}

func (r *restd) set(nodes string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = nodes
}

func (r *restd) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = fmt.Fprintf(w, `{"errors":[],"nodes":%s}`, r.nodes)
}

// writes records what the controller sent to Slurm.
type writes struct {
	mu   sync.Mutex
	sent []string
}

func (w *writes) DrainNode(_ context.Context, name, reason string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, "drain "+name+": "+reason)
	return nil
}

func (w *writes) ResumeNode(_ context.Context, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, "resume "+name)
	return nil
}

func (w *writes) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sent
	w.sent = nil
	return s
}

type fixture struct {
	c      *Controller
	restd  *restd
	cache  *slurm.Cache
	clock  *testingclock.FakePassiveClock
	writes *writes
	inf    informers.SharedInformerFactory
}

// slurmNode is one node of the fake answer.
func slurmNode(name, state, reason string) string {
	states := `"` + strings.ReplaceAll(state, "+", `","`) + `"`
	return fmt.Sprintf(`{"name":%q,"state":[%s],"reason":%q,"gres":"gpu:8","gres_used":"gpu:0"}`, name, states, reason)
}

func newFixture(t *testing.T, slurmNodes []string, nodes ...*v1.Node) *fixture {
	t.Helper()
	answer := &restd{nodes: "[" + strings.Join(slurmNodes, ",") + "]"}
	srv := httptest.NewTLSServer(answer)
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := slurm.NewClient(slurm.ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.42", TokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakePassiveClock(time.Now())
	cache := slurm.NewCache(client, slurm.CacheConfig{Interval: time.Hour, Clock: clk})
	if err := cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	view := slurm.NewView(cache, slurm.ViewConfig{MaxAge: time.Hour, GRESName: "gpu", GPUResource: "nvidia.com/gpu"})
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	for _, n := range nodes {
		if err := inf.Core().V1().Nodes().Informer().GetStore().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	w := &writes{}
	sel, _ := labels.Parse("app=slurmd")
	c := New(Config{Informers: inf, View: view, Writer: w, SlurmdPods: sel, SlurmdNamespaces: sets.New("slurm"), WritesPerSecond: 1000})
	return &fixture{c: c, restd: answer, cache: cache, clock: clk, writes: w, inf: inf}
}

func (f *fixture) sync(t *testing.T, nodes ...string) []string {
	t.Helper()
	for _, n := range nodes {
		if err := f.c.Sync(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	return f.writes.take()
}

func readyNode(name string) *st.NodeWrapper {
	n := st.MakeNode().Name(name)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	return n
}

func notReady(n *st.NodeWrapper) *st.NodeWrapper {
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}
	return n
}

func TestDrainsFollowKubernetes(t *testing.T) {
	tests := []struct {
		name  string
		slurm string // gpu01's Slurm state+flags and reason, "STATE/reason"
		node  *v1.Node
		want  []string
	}{
		{name: "cordoned, Slurm idle: drained", slurm: "IDLE/", node: readyNode("gpu01").Unschedulable(true).Obj(),
			want: []string{"drain gpu01: sluice: cordoned in Kubernetes"}},
		{name: "cordoned, Slurm busy: drained (its jobs finish)", slurm: "MIXED/", node: readyNode("gpu01").Unschedulable(true).Obj(),
			want: []string{"drain gpu01: sluice: cordoned in Kubernetes"}},
		{name: "NotReady: drained", slurm: "IDLE/", node: notReady(readyNode("gpu01")).Obj(),
			want: []string{"drain gpu01: sluice: NotReady in Kubernetes"}},
		{name: "tainted NoExecute: drained", slurm: "IDLE/", node: readyNode("gpu01").Taints([]v1.Taint{{Key: "nvidia.com/gpu-xid", Effect: v1.TaintEffectNoExecute}}).Obj(),
			want: []string{"drain gpu01: sluice: tainted nvidia.com/gpu-xid:NoExecute in Kubernetes"}},
		{name: "tainted NoSchedule: left alone", slurm: "IDLE/", node: readyNode("gpu01").Taints([]v1.Taint{{Key: "x", Effect: v1.TaintEffectNoSchedule}}).Obj()},
		{name: "an admin's drain is never touched while cordoned", slurm: "IDLE+DRAIN/bad-hca", node: readyNode("gpu01").Unschedulable(true).Obj()},
		{name: "an admin's drain is never resumed", slurm: "IDLE+DRAIN/bad-hca", node: readyNode("gpu01").Obj()},
		{name: "sluice's drain resumed when the node is back", slurm: "IDLE+DRAIN/sluice: cordoned in Kubernetes", node: readyNode("gpu01").Obj(),
			want: []string{"resume gpu01"}},
		{name: "sluice's drain kept while the cause stays", slurm: "MIXED+DRAIN/sluice: cordoned in Kubernetes", node: readyNode("gpu01").Unschedulable(true).Obj()},
		{name: "sluice's drain takes the new cause", slurm: "IDLE+DRAIN/sluice: cordoned in Kubernetes", node: notReady(readyNode("gpu01")).Obj(),
			want: []string{"drain gpu01: sluice: NotReady in Kubernetes"}},
		{name: "a node Slurm does not know: nothing", slurm: "", node: readyNode("gpu09").Unschedulable(true).Obj()},
		{name: "a resumed node keeps sluice's old reason (24.11): nothing", slurm: "IDLE/sluice: cordoned in Kubernetes", node: readyNode("gpu01").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var slurmNodes []string
			if tt.slurm != "" {
				state, reason, _ := strings.Cut(tt.slurm, "/")
				slurmNodes = append(slurmNodes, slurmNode("gpu01", state, reason))
			}
			// Three more Ready nodes, so one NotReady node is no partition.
			nodes := []*v1.Node{tt.node}
			for _, n := range []string{"gpu02", "gpu03", "gpu04"} {
				slurmNodes = append(slurmNodes, slurmNode(n, "IDLE", ""))
				nodes = append(nodes, readyNode(n).Obj())
			}
			f := newFixture(t, slurmNodes, nodes...)
			got := f.sync(t, tt.node.Name, "gpu02", "gpu03", "gpu04")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestOneWritePerSnapshot: a drain is sent once; a node event before the
// next snapshot does not send it again; a snapshot that shows it did not
// take sends it again.
func TestOneWritePerSnapshot(t *testing.T) {
	f := newFixture(t, []string{slurmNode("gpu01", "IDLE", "")}, readyNode("gpu01").Unschedulable(true).Obj())
	if got := f.sync(t, "gpu01", "gpu01"); len(got) != 1 {
		t.Fatalf("writes %v, want one drain", got)
	}
	f.restd.set("[" + slurmNode("gpu01", "IDLE", "") + `,{"name":"gpu02","state":["IDLE"]}]`)
	if err := f.cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.sync(t, "gpu01"); len(got) != 1 {
		t.Fatalf("writes %v after a snapshot without the drain, want it sent again", got)
	}
}

// TestStaleSlurmWritesNothing: with Slurm's state too old, nothing is
// drained or resumed (it may be wrong).
func TestStaleSlurmWritesNothing(t *testing.T) {
	f := newFixture(t, []string{slurmNode("gpu01", "IDLE", "")}, readyNode("gpu01").Unschedulable(true).Obj())
	f.clock.SetTime(f.clock.Now().Add(2 * time.Hour))
	if got := f.sync(t, "gpu01"); len(got) != 0 {
		t.Errorf("writes %v on a stale snapshot, want none", got)
	}
}

// TestMassNotReadyDrainsNothing: most Slurm nodes NotReady at once is
// Kubernetes losing sight of them: NotReady drains nothing, a cordon
// still drains.
func TestMassNotReadyDrainsNothing(t *testing.T) {
	var slurmNodes []string
	var nodes []*v1.Node
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("gpu%02d", i)
		slurmNodes = append(slurmNodes, slurmNode(name, "IDLE", ""))
		n := notReady(readyNode(name))
		if i == 4 {
			n = readyNode(name).Unschedulable(true)
		}
		nodes = append(nodes, n.Obj())
	}
	f := newFixture(t, slurmNodes, nodes...)
	got := f.sync(t, "gpu01", "gpu02", "gpu03", "gpu04")
	if diff := cmp.Diff([]string{"drain gpu04: sluice: cordoned in Kubernetes"}, got); diff != "" {
		t.Errorf("writes with 3 of 4 nodes NotReady (-want,+got):\n%s", diff)
	}
}

// TestSlurmdPodDeleted: a node whose slurmd pod is being deleted is
// drained, and resumed once the pod is gone.
func TestSlurmdPodDeleted(t *testing.T) {
	f := newFixture(t, []string{slurmNode("gpu01", "IDLE", ""), slurmNode("gpu02", "IDLE", "")}, readyNode("gpu01").Obj(), readyNode("gpu02").Obj())
	pod := st.MakePod().Namespace("slurm").Name("slurmd-gpu01").UID("u1").Node("gpu01").Label("app", "slurmd").Obj()
	other := st.MakePod().Namespace("slurm").Name("job").UID("u2").Node("gpu02").Obj()
	now := metav1.Now()
	other.DeletionTimestamp = &now
	f.c.observePod(pod)
	f.c.observePod(other)
	if got := f.sync(t, "gpu01", "gpu02"); len(got) != 0 {
		t.Fatalf("writes %v while slurmd runs, want none", got)
	}
	pod.DeletionTimestamp = &now
	f.c.observePod(pod)
	if diff := cmp.Diff([]string{"drain gpu01: sluice: slurmd pod slurm/slurmd-gpu01 is being deleted"}, f.sync(t, "gpu01", "gpu02")); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	f.c.forgetPod(pod)
	f.restd.set("[" + slurmNode("gpu01", "IDLE+DRAIN", "sluice: slurmd pod slurm/slurmd-gpu01 is being deleted") + "," + slurmNode("gpu02", "IDLE", "") + "]")
	if err := f.cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"resume gpu01"}, f.sync(t, "gpu01")); diff != "" {
		t.Errorf("writes once the pod is gone (-want,+got):\n%s", diff)
	}
}

// TestReadsSlurmAgainBeforeWriting: an admin's drain newer than the
// snapshot is neither overwritten by a drain of sluice's (Slurm keeps one
// reason) nor undone by a resume (seen live: a cordon right after an
// admin's drain replaced its reason, and the uncordon resumed the node).
func TestReadsSlurmAgainBeforeWriting(t *testing.T) {
	f := newFixture(t, []string{slurmNode("gpu01", "IDLE", ""), slurmNode("gpu02", "IDLE+DRAIN", "sluice: cordoned in Kubernetes")},
		readyNode("gpu01").Unschedulable(true).Obj(), readyNode("gpu02").Obj())
	// The admin drains both after the snapshot was taken.
	f.restd.set("[" + slurmNode("gpu01", "IDLE+DRAIN", "admin: bad HCA") + "," + slurmNode("gpu02", "IDLE+DRAIN", "admin: bad HCA") + "]")
	if got := f.sync(t, "gpu01", "gpu02"); len(got) != 0 {
		t.Errorf("writes %v over an admin's newer drains, want none", got)
	}
}

// TestSlurmdLabelCountsOnlyInItsNamespaces: a tenant's pod that carries
// the slurmd label, in a namespace that is not slurmd's, drains nothing
// when it is deleted (any tenant could drain any Slurm node so).
func TestSlurmdLabelCountsOnlyInItsNamespaces(t *testing.T) {
	f := newFixture(t, []string{slurmNode("gpu01", "IDLE", "")}, readyNode("gpu01").Obj())
	impostor := st.MakePod().Namespace("tenant").Name("not-slurmd").UID("u3").Node("gpu01").Label("app", "slurmd").Obj()
	now := metav1.Now()
	impostor.DeletionTimestamp = &now
	f.c.observePod(impostor)
	if got := f.sync(t, "gpu01"); len(got) != 0 {
		t.Errorf("writes %v for a pod of namespace tenant with the slurmd label, want none", got)
	}
}
