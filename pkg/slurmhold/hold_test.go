// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmhold

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
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/slurm"
)

// jobs is a fake JobWriter: jobs by id, each job's states in turn.
type jobs struct {
	mu        sync.Mutex
	next      int
	states    []string // what Job answers, in turn (the last repeats)
	list      []slurm.Job
	cancelled []string
}

func (j *jobs) SubmitPlaceholder(context.Context, slurm.Placeholder) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	return "1", nil
}

func (j *jobs) Job(_ context.Context, id string) (*slurm.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.states[0]
	if len(j.states) > 1 {
		j.states = j.states[1:]
	}
	return &slurm.Job{ID: id, State: st, Reason: "Resources", Nodes: "gpu01", GRES: []string{"gpu:4(IDX:4-7)"}}, nil
}

func (j *jobs) Jobs(context.Context, string) ([]slurm.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]slurm.Job(nil), j.list...), nil
}

func (j *jobs) CancelJob(_ context.Context, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cancelled = append(j.cancelled, id)
	return nil
}

type fixture struct {
	h        *Holder
	jobs     *jobs
	client   *fake.Clientset
	store    func(*v1.Pod)
	view     *slurm.View
	recorder *events.FakeRecorder
}

// newFixture: gpu01 shared with slurmd, 8 GPUs, Slurm counts 4 in use.
func newFixture(t *testing.T, states ...string) *fixture {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"nodes":[{"name":"gpu01","state":["MIXED"],"gres":"gpu:8","gres_used":"gpu:4(IDX:4-7)"}],"errors":[]}`))
	}))
	t.Cleanup(srv.Close)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := slurm.NewClient(slurm.ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.42", TokenFile: token})
	if err != nil {
		t.Fatal(err)
	}
	cache := slurm.NewCache(client, slurm.CacheConfig{Interval: time.Hour})
	if err := cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	view := slurm.NewView(cache, slurm.ViewConfig{MaxAge: time.Hour, GRESName: "gpu", GPUResource: "nvidia.com/gpu", SharedNodeLabel: "shared"})
	cs := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(cs, 0)
	j := &jobs{states: states}
	rec := events.NewFakeRecorder(10)
	if err := inf.Core().V1().Nodes().Informer().GetStore().Add(shared); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Jobs: j, View: view, Pods: inf.Core().V1().Pods(), Client: cs, Recorder: rec,
		Timeout: time.Second, Resync: time.Hour, PollEvery: time.Millisecond,
		Nodes: inf.Core().V1().Nodes().Lister(), Owner: testOwner, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	store := func(p *v1.Pod) {
		if err := inf.Core().V1().Pods().Informer().GetStore().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{h: h, jobs: j, client: cs, store: store, view: view, recorder: rec}
}

func gpuPod(name string, gpus int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Limits:   v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
		}}}},
	}
}

var shared = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu01", Labels: map[string]string{"shared": "true"}}}

// TestHold: the job runs after a pending read; the pod gets the job, its
// GPU indices and the node; once bound, its GPUs are not counted twice
// (Slurm's 4 in use are the placeholder's).
func TestHold(t *testing.T) {
	f := newFixture(t, "PENDING", "RUNNING")
	pod := gpuPod("a", 4)
	if _, err := f.client.CoreV1().Pods("ml").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.h.Needs(pod, shared); got != 4 {
		t.Fatalf("Needs on a shared node = %d, want 4", got)
	}
	if got := f.h.Needs(pod, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu01"}}); got != 0 {
		t.Fatalf("Needs on an unshared node = %d, want 0", got)
	}
	hold, err := f.h.Hold(context.Background(), pod, shared, 4)
	if err != nil {
		t.Fatal(err)
	}
	if hold.JobID != "1" || hold.Indexes != "4-7" {
		t.Errorf("hold %+v, want job 1 with GPUs 4-7", hold)
	}
	got, _ := f.client.CoreV1().Pods("ml").Get(context.Background(), "a", metav1.GetOptions{})
	if got.Annotations[AnnotationJob] != "1" || got.Annotations[AnnotationGPUs] != "4-7" || got.Annotations[AnnotationNode] != "gpu01" {
		t.Errorf("annotations %v", got.Annotations)
	}
	snap := f.view.Read(klog.Background()).Snap
	if held := f.view.HeldGPUs(shared, snap.Nodes["gpu01"]); held != 4 {
		t.Errorf("before the pod is bound, Slurm holds %d, want 4", held)
	}
	got.Spec.NodeName = "gpu01"
	f.store(got)
	if held := f.view.HeldGPUs(shared, snap.Nodes["gpu01"]); held != 0 {
		t.Errorf("with the pod bound, Slurm holds %d besides it, want 0 (its placeholder is its own request)", held)
	}
}

// TestHoldTimesOut: a job still pending at the timeout is cancelled, the
// error says why, and the node is avoided for the pod.
func TestHoldTimesOut(t *testing.T) {
	f := newFixture(t, "PENDING")
	pod := gpuPod("a", 4)
	_, err := f.h.Hold(context.Background(), pod, shared, 4)
	if err == nil || !strings.HasPrefix(err.Error(), ReasonRefused) || !strings.Contains(err.Error(), "still PENDING (reason Resources)") {
		t.Fatalf("Hold: %v, want a refusal saying the job is still pending", err)
	}
	if len(f.jobs.cancelled) != 1 {
		t.Errorf("cancelled %v, want the job", f.jobs.cancelled)
	}
	if got := f.h.RefusedNodes(pod); len(got) != 1 || got[0] != "gpu01" {
		t.Errorf("refused nodes %v, want gpu01", f.h.RefusedNodes(pod))
	}
	// The refusal keeps its cause: the scheduler folds the failed
	// attempt's Event into the next one of the pod (events.k8s.io series),
	// so the next rejection must say why itself.
	if why := f.h.Refused(pod)["gpu01"]; !strings.Contains(why, "still PENDING (reason Resources)") {
		t.Errorf("refusal of gpu01 says %q, want the cause (still PENDING)", why)
	}
}

// TestSweep: a job whose pod is gone is cancelled; a job its bound pod
// claims is kept; a job no bound pod claims is kept through the grace
// period, then cancelled; a bound pod whose job is gone gets one Event.
func TestSweep(t *testing.T) {
	f := newFixture(t, "RUNNING")
	bound := gpuPod("bound", 4)
	bound.Spec.NodeName = "gpu01"
	bound.Annotations = map[string]string{AnnotationJob: "2", AnnotationNode: "gpu01"}
	lost := gpuPod("lost", 2)
	lost.Spec.NodeName = "gpu01"
	lost.Annotations = map[string]string{AnnotationJob: "9", AnnotationNode: "gpu01"}
	unclaimed := gpuPod("unclaimed", 1)
	for _, p := range []*v1.Pod{bound, lost, unclaimed} {
		f.store(p)
	}
	ours := func(j slurm.Job) slurm.Job {
		j.User, j.Comment = "root", OwnerPrefix+testOwner+": GPUs of pod ml/"+j.Name
		return j
	}
	f.jobs.list = []slurm.Job{
		ours(slurm.Job{ID: "1", Name: JobPrefix + "gone-uid", State: "RUNNING", Nodes: "gpu01"}),
		ours(slurm.Job{ID: "2", Name: JobPrefix + "bound-uid", State: "RUNNING", Nodes: "gpu01"}),
		ours(slurm.Job{ID: "3", Name: JobPrefix + "unclaimed-uid", State: "PENDING"}),
		ours(slurm.Job{ID: "4", Name: JobPrefix + "ended-uid", State: "CANCELLED"}),
		ours(slurm.Job{ID: "9", Name: JobPrefix + "lost-uid", State: "RUNNING", Nodes: "gpu01"}),
	}
	ctx := context.Background()
	if err := f.h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1"}; strings.Join(f.jobs.cancelled, ",") != strings.Join(want, ",") {
		t.Errorf("first sweep cancelled %v, want %v", f.jobs.cancelled, want)
	}
	// The grace period passes for job 3.
	f.h.mu.Lock()
	f.h.unclaimed["3"] = time.Now().Add(-3 * time.Hour)
	f.h.mu.Unlock()
	// Job 9, which held lost's GPUs (as Slurm said), is gone.
	f.jobs.list = f.jobs.list[1:4]
	if err := f.h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if want := "1,3"; strings.Join(f.jobs.cancelled, ",") != want {
		t.Errorf("cancelled %v, want %s", f.jobs.cancelled, want)
	}
	var got []string
	for len(f.recorder.Events) > 0 {
		got = append(got, <-f.recorder.Events)
	}
	if len(got) != 1 || !strings.Contains(got[0], ReasonLost) || !strings.Contains(got[0], "Slurm job 9") {
		t.Errorf("events %q, want one %s for job 9", got, ReasonLost)
	}
}

// TestRefusalCauseBounded: a long cause (sbatch's whole stderr) is cut, on
// a rune boundary, before a rejection repeats it for every refused node.
func TestRefusalCauseBounded(t *testing.T) {
	long := strings.Repeat("é", maxRefusalCause)
	got := truncate(long, maxRefusalCause)
	if len(got) > maxRefusalCause+len("...") || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("truncate kept %d bytes (valid UTF-8: %v), want at most %d and a marked cut", len(got), utf8.ValidString(got), maxRefusalCause+3)
	}
	if short := "connection refused"; truncate(short, maxRefusalCause) != short {
		t.Errorf("truncate changed a short cause")
	}
}

// TestSweepTrustsSlurmNotThePod: which job holds which pod's GPUs is
// Slurm's to say (the job's name, its node, its owner), not the pod's
// annotations, which its tenant may edit: a bound pod whose annotations
// were changed keeps its job; a job named like a placeholder but not
// submitted by this sluice (another Slurm user, another cluster) is never
// cancelled, whatever its name says.
func TestSweepTrustsSlurmNotThePod(t *testing.T) {
	f := newFixture(t, "RUNNING")
	tampered := gpuPod("tampered", 4)
	tampered.Spec.NodeName = "gpu01"
	tampered.Annotations = map[string]string{AnnotationJob: "999", AnnotationNode: "elsewhere"}
	f.store(tampered)
	// Held by a placeholder of an earlier version (no owner in its
	// comment): neither touched nor reported lost.
	old := gpuPod("old", 2)
	old.Spec.NodeName = "gpu01"
	old.Annotations = map[string]string{AnnotationJob: "8", AnnotationNode: "gpu01"}
	f.store(old)
	ours := "sluice-cluster=" + testOwner + ": GPUs of pod ml/x"
	f.jobs.list = []slurm.Job{
		{ID: "2", Name: JobPrefix + "tampered-uid", State: "RUNNING", Nodes: "gpu01", User: "root", Comment: ours},
		{ID: "5", Name: JobPrefix + "gone-uid", State: "RUNNING", Nodes: "gpu01", User: "alice", Comment: ours},
		{ID: "6", Name: JobPrefix + "gone-uid", State: "RUNNING", Nodes: "gpu01", User: "root", Comment: "sluice-cluster=another-cluster"},
		{ID: "7", Name: JobPrefix + "gone-uid", State: "RUNNING", Nodes: "gpu01", User: "root", Comment: "my own job"},
		{ID: "8", Name: JobPrefix + "old-uid", State: "RUNNING", Nodes: "gpu01", User: "root", Comment: "sluice: GPUs of pod ml/old"},
	}
	ctx := context.Background()
	for range 2 {
		if err := f.h.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.h.mu.Lock()
		for id := range f.h.unclaimed {
			f.h.unclaimed[id] = time.Now().Add(-3 * time.Hour) // past the grace period
		}
		f.h.mu.Unlock()
	}
	if len(f.jobs.cancelled) != 0 {
		t.Errorf("cancelled %v, want none: job 2 holds its bound pod's GPUs, 5-8 are not this sluice's", f.jobs.cancelled)
	}
	for len(f.recorder.Events) > 0 {
		if e := <-f.recorder.Events; strings.Contains(e, ReasonLost) && strings.Contains(e, "job 8") {
			t.Errorf("a pod held by a running job of an earlier version was reported lost: %s", e)
		}
	}
}

// testOwner is the fixture's sluice (its cluster's id).
const testOwner = "cluster-uid-1"

// TestHeldGPUsFromSlurmNotAnnotations: a tenant who writes a placeholder's
// annotations on a bound pod makes no GPUs of Slurm's its own: which job
// holds which pod's GPUs is read from Slurm (and the jobs sluice starts).
func TestHeldGPUsFromSlurmNotAnnotations(t *testing.T) {
	f := newFixture(t, "RUNNING")
	forged := gpuPod("forged", 4)
	forged.Spec.NodeName = "gpu01"
	forged.Annotations = map[string]string{AnnotationJob: "77", AnnotationNode: "gpu01"}
	f.store(forged)
	if err := f.h.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := f.view.Read(klog.Background()).Snap
	if held := f.view.HeldGPUs(shared, snap.Nodes["gpu01"]); held != 4 {
		t.Errorf("Slurm's jobs hold %d GPUs on gpu01 besides the pods' placeholders, want 4: a pod's annotations took them as its own", held)
	}
}
