// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// warmRig is a make-before-break setting: an HTTP provider whose
// workloads take startDelay to serve, the overflow node binary in front
// of it (a process, so it can be killed), sluice-scheduler with the
// shipped configuration (make-before-break on), and one physical 8-GPU
// node full of a production Deployment under a PDB.
type warmRig struct {
	cp    *harness.ControlPlane
	ns    string
	srv   *providerserver.Server
	cfg   *overflownode.Config
	node  *harness.Process
	moves *moveWatch
}

func newWarmRig(t *testing.T, startDelay time.Duration, replicas int32, maxUnavailable int32) *warmRig {
	t.Helper()
	cp := harness.Shared(t)
	r := &warmRig{cp: cp, ns: harness.NewNamespace(t, cp.Client)}
	r.srv = providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}, StartDelay: startDelay})
	t.Cleanup(r.srv.Close)
	name := "ovf-warm-" + harness.NewNameSuffix()
	deleteNodeAtEnd(t, cp, name)
	r.cfg = &overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: name,
		ReconcileIntervalSeconds: ptr.To[int64](1),
		Providers:                []overflownode.ProviderConfig{{Name: "cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: r.srv.URL}}},
	}
	physical := "warm-gpu-" + harness.NewNameSuffix()
	harness.CreateNodes(t, cp.Client, harness.GPUNode(physical, 8).Fabric("wl1", "ws1", "wb1").Obj())
	r.node = startNodeProcess(t, cp, r.cfg)
	// The scheduler waits on warm instances only where the node says it
	// makes them (it has read the claims).
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		o, err := offer.Of(n, true)
		return err == nil && o.Warm, nil
	}, func() string { return "overflow node " + name + " offering warm instances" })
	startScheduler(t, cp)
	r.moves = watchMoves(t, cp, r.ns, "llm")
	d := harness.InferenceDeployment(r.ns, "llm", replicas, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, harness.PDB(r.ns, "llm", intstr.FromInt32(maxUnavailable)))
	waitReadyOn(t, cp, r.ns, "llm", physical, int(replicas))
	return r
}

// warmIDs are the provider's warm instances.
func (r *warmRig) warmIDs() []string {
	var out []string
	for _, id := range r.srv.IDs() {
		if provider.IsWarm(id) {
			out = append(out, id)
		}
	}
	return out
}

// moveWatch follows a Deployment's pods at every change: the fewest
// Ready replicas seen, and, as violations, a pod evicted while its
// WarmCondition was not True.
type moveWatch struct {
	mu         sync.Mutex
	ready      map[string]bool
	minReady   int
	seen       bool
	violations harness.Violations
}

func watchMoves(t *testing.T, cp *harness.ControlPlane, ns, app string) *moveWatch {
	t.Helper()
	w := &moveWatch{ready: map[string]bool{}}
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		p := e.Pod()
		if p == nil || p.Labels["app"] != app {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if e.New != nil && p.DeletionTimestamp != nil && (e.Old == nil || e.Old.DeletionTimestamp == nil) {
			if ready, _, msg, _ := offer.Warm(p); !ready {
				w.violations.Addf("%s on %s evicted without a Ready warm instance (%q)", p.Name, p.Spec.NodeName, msg)
			}
		}
		w.ready[p.Name] = e.New != nil && p.DeletionTimestamp == nil && ready(p)
		n := 0
		for _, r := range w.ready {
			if r {
				n++
			}
		}
		if w.seen && n < w.minReady || !w.seen && n > 0 {
			w.minReady, w.seen = n, true
		}
	})
	return w
}

// reset starts counting the fewest Ready replicas from now.
func (w *moveWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.ready {
		if r {
			n++
		}
	}
	w.minReady, w.seen = n, true
}

func (w *moveWatch) min() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minReady
}

// runningAs reports the replicas Ready on the overflow node and, for
// each, the workload it runs as.
func (r *warmRig) runningAs(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, p := range homePods(t, r.cp, r.ns, "llm") {
		if p.Spec.NodeName != r.cfg.NodeName || !ready(&p) || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == overflownode.RemoteCondition {
				out[p.Name] = c.Message
			}
		}
	}
	return out
}

// TestMakeBeforeBreakClaim: a research pod claims the node of an
// 8-replica Deployment (PDB maxUnavailable 2) whose remote instances take
// 3 s to start. Every victim is evicted only once its warm instance serves
// (watched at every pod change), every replacement adopts one (8 creates,
// 8 adoptions at the provider, no cold start).
func TestMakeBeforeBreakClaim(t *testing.T) {
	r := newWarmRig(t, 3*time.Second, 8, 2)
	r.moves.reset()
	harness.CreatePods(t, r.cp.Client, harness.Pod(r.ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForPodsBound(t, r.cp.Client, r.ns, "train")
	waitReadyOn(t, r.cp, r.ns, "llm", r.cfg.NodeName, 8)

	if c, a := r.srv.Creates(), r.srv.Adoptions(); c != 8 || a != 8 {
		t.Errorf("provider saw %d creates and %d adoptions, want 8 and 8 (one warm instance per victim, each adopted)", c, a)
	}
	for pod, as := range r.runningAs(t) {
		if !strings.Contains(as, provider.WarmPrefix) {
			t.Errorf("%s %s, want a warm instance", pod, as)
		}
	}
	// The PDB bounds the dip either way; what make-before-break changes
	// is how long it lasts, which a test does not time.
	t.Logf("fewest Ready replicas during the claim: %d of 8", r.moves.min())
	r.moves.violations.Check(t)
}

// TestWarmInstanceAdoptedAcrossANodeKill: the overflow node process is
// killed (SIGKILL) once a victim's warm instance serves; a victim is
// evicted meanwhile and its replacement bound to the dead node (the first
// one's, or, if that one was adopted just before the kill, the next
// one's). A new process adopts a warm instance for it (no second create),
// and the claim completes with every replacement adopted.
func TestWarmInstanceAdoptedAcrossANodeKill(t *testing.T) {
	r := newWarmRig(t, 2*time.Second, 4, 1)
	harness.CreatePods(t, r.cp.Client, harness.Pod(r.ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		for _, p := range homePods(t, r.cp, r.ns, "llm") {
			if ready, _, _, _ := offer.Warm(&p); ready {
				return true, nil
			}
		}
		return false, nil
	}, func() string {
		return "a victim's warm instance Ready; pods: " + describe(homePods(t, r.cp, r.ns, "llm"))
	})
	r.node.Kill()
	<-r.node.Exited()

	// A replacement bound to the dead node, and not running anywhere.
	var orphan string
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		for _, p := range homePods(t, r.cp, r.ns, "llm") {
			if p.Spec.NodeName == r.cfg.NodeName && !ready(&p) && p.DeletionTimestamp == nil {
				orphan = p.Name
				return true, nil
			}
		}
		return false, nil
	}, func() string {
		return "a replacement bound to the killed overflow node; pods: " + describe(homePods(t, r.cp, r.ns, "llm"))
	})
	if c := r.srv.Creates(); c != 4 {
		t.Errorf("%d creates before the restart, want the 4 warm instances", c)
	}

	r.node = startNodeProcess(t, r.cp, r.cfg)
	harness.WaitForPodsBound(t, r.cp.Client, r.ns, "train")
	waitReadyOn(t, r.cp, r.ns, "llm", r.cfg.NodeName, 4)
	as := r.runningAs(t)
	if !strings.Contains(as[orphan], provider.WarmPrefix) {
		t.Errorf("%s, bound while the node was dead, %s; want an adopted warm instance", orphan, as[orphan])
	}
	if c, a := r.srv.Creates(), r.srv.Adoptions(); c != 4 || a != 4 {
		t.Errorf("provider saw %d creates and %d adoptions, want 4 and 4", c, a)
	}
	r.moves.violations.Check(t)
}

// TestOrphanedWarmInstancesCollectedAfterANodeKill: warm instances that
// never serve (a provider slower than the claim) are started for a
// claim's victims; the node process is killed, the research pod deleted
// (the claim ends), and a new node process deletes the orphaned warm
// instances. No victim was evicted: none had a warm instance Ready.
func TestOrphanedWarmInstancesCollectedAfterANodeKill(t *testing.T) {
	r := newWarmRig(t, time.Hour, 2, 1)
	harness.CreatePods(t, r.cp.Client, harness.Pod(r.ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return len(r.warmIDs()) == 2, nil
	}, func() string { return fmt.Sprintf("2 warm instances at the provider; it has %v", r.srv.IDs()) })
	for _, p := range homePods(t, r.cp, r.ns, "llm") {
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
			got, err := r.cp.Client.CoreV1().Pods(r.ns).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready, final, msg, ok := offer.Warm(got)
			return ok && !ready && !final && strings.Contains(msg, "created at provider cloud"), nil
		}, func() string { return p.Name + " told its warm instance is starting" })
	}
	r.node.Kill()
	<-r.node.Exited()
	if err := r.cp.Client.CoreV1().Pods(r.ns).Delete(context.Background(), "train", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		list, err := dynamic.NewForConfigOrDie(r.cp.Config).Resource(v1alpha1.Resource).Namespace(r.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	}, func() string { return "the claim gone with its research pod" })

	r.node = startNodeProcess(t, r.cp, r.cfg)
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		return len(r.warmIDs()) == 0, nil
	}, func() string { return fmt.Sprintf("orphaned warm instances deleted; the provider has %v", r.srv.IDs()) })
	for _, p := range homePods(t, r.cp, r.ns, "llm") {
		if p.Spec.NodeName == r.cfg.NodeName {
			t.Errorf("%s moved to the overflow node without a Ready warm instance", p.Name)
		}
	}
	r.moves.violations.Check(t)
}
