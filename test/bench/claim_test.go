// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/availability"
	"github.com/sluice-sched/sluice/internal/benchfmt"
	"github.com/sluice-sched/sluice/internal/localcluster"
	claimsv1alpha1 "github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// The namespaces of the ResearchClaim case (performance-config.yaml).
const (
	productionNS = "production-0"
	researchNS   = "research-0"
)

// A claim run goes through these states, each entered at an event its
// informers saw.
type claimState int

const (
	claimIdle      claimState = iota // production runs, no gang pod yet
	claimClaiming                    // the gang has pods, not all bound
	claimClaimed                     // the whole gang is bound
	claimReturning                   // the gang ended; production is not all back
	claimReturned                    // every replica serves on a physical node again
)

// claimRun follows one ResearchClaim workload: the overflow node it
// starts (sluice's configurations), and, at every pod, Deployment and
// claim event, each Deployment's serving replicas, the claim (from the
// gang's first pod to every gang pod bound), the production pods it
// deleted and left without a node, and the return (from the gang's end
// until every replica serves again and none is left on the overflow node).
type claimRun struct {
	tracker     *availability.Tracker
	remoteStart time.Duration
	gangPods    int
	// overflow: the configuration has an overflow node to move production
	// to (sluice's; the stock baseline has none).
	overflow bool

	mu         sync.Mutex
	state      claimState
	bound      map[string]bool // research pods bound to a node, not being deleted
	research   map[string]bool // research pods not being deleted
	onOverflow map[string]bool // production pods bound to the overflow node, not being deleted
	unbound    map[string]bool // production pods without a node, not being deleted
	victims    map[string]bool // production pods deleted during the claim
	unplaced   int             // len(unbound) when the whole gang ran
	waves      int             // the most eviction waves a ResearchClaim reached
	claims     int
	times      [claimReturned + 1]time.Time // when each state was entered
}

// The overflow node the bench runs (its default name).
const overflowNodeName = overflownode.DefaultNodeName

// startClaimRun starts following the workload of tCtx; its informers stop
// with tCtx.
func startClaimRun(tCtx ktesting.TContext, wi workloadInfo) (*claimRun, error) {
	r := &claimRun{tracker: availability.New(nil), remoteStart: wi.RemoteStart, gangPods: wi.GangPods, overflow: wi.Config != configStock,
		bound: map[string]bool{}, research: map[string]bool{}, onOverflow: map[string]bool{}, unbound: map[string]bool{}, victims: map[string]bool{}}
	factory := informers.NewSharedInformerFactory(tCtx.Client(), 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.pod(o, false) },
		UpdateFunc: func(_, o any) { r.pod(o, false) },
		DeleteFunc: func(o any) { r.pod(o, true) },
	}); err != nil {
		return nil, err
	}
	deployments := factory.Apps().V1().Deployments().Informer()
	if _, err := deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.deployment,
		UpdateFunc: func(_, o any) { r.deployment(o) },
	}); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(tCtx.RESTConfig())
	if err != nil {
		return nil, err
	}
	store := claims.NewStore(tCtx, dyn, tCtx.Client().Discovery())
	store.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.claim(o, +1) },
		UpdateFunc: func(_, o any) { r.claim(o, 0) },
		DeleteFunc: func(o any) { r.claim(o, -1) },
	})
	factory.Start(tCtx.Done())
	if !cache.WaitForCacheSync(tCtx.Done(), pods.HasSynced, deployments.HasSynced) {
		return nil, tCtx.Err()
	}
	return r, nil
}

func (r *claimRun) deployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Namespace != productionNS {
		return
	}
	r.tracker.Want(d.Spec.Template.Labels["app"], int(ptr.Deref(d.Spec.Replicas, 1)))
	r.step()
}

func (r *claimRun) pod(obj any, gone bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := p.Namespace + "/" + p.Name
	live := !gone && p.DeletionTimestamp == nil
	switch p.Namespace {
	case productionNS:
		r.tracker.Observe(p.Labels["app"], key, !gone && availability.Serving(p))
		r.mu.Lock()
		setIf(r.onOverflow, key, live && p.Spec.NodeName == overflowNodeName)
		setIf(r.unbound, key, live && p.Spec.NodeName == "")
		if !live && r.state == claimClaiming {
			r.victims[key] = true
		}
		r.mu.Unlock()
	case researchNS:
		r.mu.Lock()
		setIf(r.research, key, live)
		setIf(r.bound, key, live && p.Spec.NodeName != "")
		r.mu.Unlock()
	default:
		return
	}
	r.step()
}

// claim counts the claims and keeps the most eviction waves (the
// claim's status.rounds) one reached.
func (r *claimRun) claim(obj any, delta int) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r.mu.Lock()
	r.claims += delta
	if c, ok := obj.(*claimsv1alpha1.ResearchClaim); ok {
		r.waves = max(r.waves, int(c.Status.Rounds))
	}
	r.mu.Unlock()
	r.step()
}

// step moves to the next state when the cluster has reached it.
func (r *claimRun) step() {
	r.mu.Lock()
	defer r.mu.Unlock()
	enter := func(s claimState, phase string) {
		r.state, r.times[s] = s, time.Now()
		r.tracker.SetPhase(phase)
	}
	switch r.state {
	case claimIdle:
		if len(r.research) > 0 {
			enter(claimClaiming, "claim")
		}
	case claimClaiming:
		if len(r.bound) >= r.gangPods {
			r.unplaced = len(r.unbound)
			enter(claimClaimed, "")
		}
	case claimClaimed:
		if len(r.research) < r.gangPods {
			enter(claimReturning, "return")
		}
	case claimReturning:
		if len(r.research) == 0 && len(r.onOverflow) == 0 && r.claims == 0 && r.tracker.AllReady() {
			enter(claimReturned, "")
		}
	}
}

// startOverflowNode runs bin/sluice-overflow-node (on PATH: `make bench`
// builds it) for the home cluster of tCtx, in front of an HTTP provider
// whose workloads take the workload's remote start to run, and returns
// once the node is Ready and offers warm instances. Both stop at the end
// of the workload.
func (r *claimRun) startOverflowNode(tCtx ktesting.TContext) error {
	bin, err := exec.LookPath("sluice-overflow-node")
	if err != nil {
		return fmt.Errorf("the ResearchClaim workload runs the real overflow node: %w (`make bench` builds it into bin/)", err)
	}
	srv := providerserver.Start(providerserver.Options{StartDelay: r.remoteStart,
		Capacity: map[string]string{"nvidia.com/gpu": "100000", "cpu": "100000", "memory": "1000Ti"}})
	tCtx.Cleanup(srv.Close)
	dir := tCtx.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := localcluster.WriteKubeconfig(tCtx.RESTConfig(), kubeconfig); err != nil {
		return err
	}
	cfg := overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: overflowNodeName,
		MaxPods:                  ptr.To[int32](100000),
		ReconcileIntervalSeconds: ptr.To[int64](1),
		Providers:                []overflownode.ProviderConfig{{Name: "cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: srv.URL}}},
		// Its leader Lease in a namespace this cluster has (it has no
		// sluice-system).
		LeaderElection: overflownode.LeaderElection{ResourceNamespace: metav1.NamespaceSystem},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "overflow-node.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	tb, ok := tCtx.TB().(testing.TB)
	if !ok {
		return fmt.Errorf("the workload's %T is not a testing.TB", tCtx.TB())
	}
	p := harness.StartProcess(tb, "sluice-overflow-node", bin, "--config="+file, "--kubeconfig="+kubeconfig, "--metrics-bind-address=")
	// Under `make bench` its log is kept beside the results (the
	// workload's cleanups run before the process stops): a claim that
	// stalls or a return that sticks is read there afterwards.
	if dir := os.Getenv("SLUICE_BENCH_DIR"); dir != "" {
		keep := filepath.Join(dir, strings.ReplaceAll(tCtx.Name(), "/", "_")+".overflow-node.log")
		tCtx.Cleanup(func() {
			if data, err := os.ReadFile(p.Log); err == nil {
				_ = os.WriteFile(keep, data, 0o644)
			}
		})
	}
	var last string
	err = wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("sluice-overflow-node exited; its log: %s", p.Log)
		default:
		}
		n, err := tCtx.Client().CoreV1().Nodes().Get(ctx, overflowNodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		o, err := offer.Of(n, true)
		last = fmt.Sprintf("offer %+v (%v)", o, err)
		return err == nil && o.Warm && overflow.NodeReady(n), nil
	})
	if err != nil {
		return fmt.Errorf("overflow node %s Ready with warm instances: %s: %w", overflowNodeName, last, err)
	}
	return nil
}

// finish waits until production is back and returns the figures.
func (r *claimRun) finish(tCtx ktesting.TContext, workload string) (benchfmt.Availability, error) {
	err := wait.PollUntilContextTimeout(tCtx, 200*time.Millisecond, returnTimeout, true, func(context.Context) (bool, error) {
		r.step() // AllReady may turn true between events of other kinds
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.state == claimReturned, nil
	})
	// The budgets, read before the lock: informer callbacks take it.
	pdbs, listErr := tCtx.Client().PolicyV1().PodDisruptionBudgets(productionNS).List(tCtx, metav1.ListOptions{})
	if err != nil {
		why := "budgets not read: " + fmt.Sprint(listErr)
		if listErr == nil {
			why = stuck(tCtx, pdbs.Items)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return benchfmt.Availability{}, fmt.Errorf("production did not return: state %d, %d research pods, %d production pods on %s, %d claims; %s: %w",
			r.state, len(r.research), len(r.onOverflow), overflowNodeName, r.claims, why, err)
	}
	if listErr != nil {
		return benchfmt.Availability{}, listErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := benchfmt.Availability{Workload: workload, RemoteStartSeconds: r.remoteStart.Seconds(),
		ClaimSeconds:  r.times[claimClaimed].Sub(r.times[claimClaiming]).Seconds(),
		ReturnSeconds: r.times[claimReturned].Sub(r.times[claimReturning]).Seconds(),
		Victims:       len(r.victims), Unplaced: r.unplaced, Waves: r.waves}
	claim, back := r.tracker.Phase("claim"), r.tracker.Phase("return")
	for _, w := range r.tracker.Workloads() {
		d := benchfmt.DeploymentAvailability{Name: w, Claim: claim[w], Return: back[w]}
		if d.PDBHealthy, err = pdbHealthy(pdbs.Items, w, d.Claim.Replicas); err != nil {
			return benchfmt.Availability{}, err
		}
		if d.Claim.MinReady < d.PDBHealthy {
			a.BelowPDB++
		}
		a.Deployments = append(a.Deployments, d)
	}
	return a, nil
}

// returnTimeout bounds a claim workload from its end to production's
// return (about a minute when nothing sticks).
const returnTimeout = 10 * time.Minute

// stuck says what holds production back when it does not return: the
// budgets that allow no disruption and the production pods that are not
// serving, with where they are and their status.
func stuck(tCtx ktesting.TContext, pdbs []policyv1.PodDisruptionBudget) string {
	var out []string
	for _, pdb := range pdbs {
		if pdb.Status.DisruptionsAllowed == 0 {
			out = append(out, fmt.Sprintf("budget %s: %d of %d healthy, none may go", pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy))
		}
	}
	pods, err := tCtx.Client().CoreV1().Pods(productionNS).List(tCtx, metav1.ListOptions{})
	if err != nil {
		return strings.Join(append(out, "listing production pods: "+err.Error()), "; ")
	}
	for _, p := range pods.Items {
		if availability.Serving(&p) {
			continue
		}
		var conds []string
		for _, c := range p.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
		}
		out = append(out, fmt.Sprintf("pod %s on %q: %s deleting=%v [%s]", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, strings.Join(conds, ", ")))
	}
	if len(out) == 0 {
		return "every budget allows a disruption and every production pod serves"
	}
	return strings.Join(out, "; ")
}

// pdbHealthy is the fewest Ready replicas of workload w (its pods' app
// label, which is also its budget's name) that its PodDisruptionBudget
// keeps with replicas wanted, as the disruption controller counts it; 0
// without a budget.
func pdbHealthy(pdbs []policyv1.PodDisruptionBudget, w string, replicas int) (int, error) {
	for _, pdb := range pdbs {
		if pdb.Name != w {
			continue
		}
		switch {
		case pdb.Spec.MinAvailable != nil:
			return intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, replicas, true)
		case pdb.Spec.MaxUnavailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
			return max(replicas-n, 0), err
		}
	}
	return 0, nil
}

// startClaimCase, for the ResearchClaim case only, follows the workload
// and hands its figures to done when it ends; the overflow node starts at
// the first createNodes (nodesReady).
func startClaimCase(tCtx ktesting.TContext, wi workloadInfo, done func(benchfmt.Availability)) error {
	if !strings.Contains(tCtx.Name(), clusterPartsCase) {
		return nil
	}
	r, err := startClaimRun(tCtx, wi)
	if err != nil {
		return err
	}
	claimRuns.Store(tCtx.Name(), &pendingClaim{run: r, done: done})
	return nil
}

type pendingClaim struct {
	run     *claimRun
	done    func(benchfmt.Availability)
	started bool
}

// claimRuns are the running claim workloads' followers by test name.
var claimRuns sync.Map

// nodesReady runs after each createNodes of a ResearchClaim workload,
// once production is Ready: it starts the overflow node (sluice's
// configurations; the stock baseline has none), and at the end
// of the workload (a cleanup registered now runs before the node stops)
// waits for the return and records the figures.
func nodesReady(tCtx ktesting.TContext) error {
	v, ok := claimRuns.Load(tCtx.Name())
	if !ok {
		return nil
	}
	pc := v.(*pendingClaim)
	if pc.started {
		return nil
	}
	pc.started = true
	if pc.run.overflow {
		if err := pc.run.startOverflowNode(tCtx); err != nil {
			return err
		}
	}
	tCtx.Cleanup(func() {
		defer claimRuns.Delete(tCtx.Name())
		if tCtx.Failed() {
			return
		}
		a, err := pc.run.finish(tCtx, tCtx.Name())
		if err != nil {
			tCtx.Errorf("%v", err)
			return
		}
		pc.done(a)
	})
	return nil
}

func setIf(m map[string]bool, key string, on bool) {
	if on {
		m[key] = true
	} else {
		delete(m, key)
	}
}
