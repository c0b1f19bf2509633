// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package sim replays clusters and workloads through the real scheduler:
// a kube-apiserver and etcd in this process, sluice-scheduler started from
// a KubeSchedulerConfiguration with sluice's registry (the binary's
// start-up path), and, where evictions and replacements matter, the real
// ReplicaSet, Deployment and disruption controllers and a node simulator.
// Nothing of the scheduling is re-implemented: policies differ only in
// their configuration. It measures what users pick a scheduler on: GPUs
// left idle, how far gangs spread over the fabric, evictions and overflow.
package sim

import (
	"context"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/labels"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/internal/nodesim"
)

// EnvOptions shape a simulated cluster.
type EnvOptions struct {
	// Controllers runs the ReplicaSet, Deployment and disruption
	// controllers and a node simulator (for evictions and replacements).
	Controllers bool
	// Log receives the components' logs (discarded when nil).
	Log io.Writer
	// CRDs are CRD manifests installed before the scheduler starts: the
	// ResearchClaim CRD, without which no claim can be made.
	CRDs []string
}

// Env is one simulated cluster running one policy.
type Env struct {
	Client kubernetes.Interface
	Policy Policy

	tb     *localcluster.ProcessTB
	cp     *localcluster.ControlPlane
	sched  *localcluster.Scheduler
	cancel context.CancelFunc
	dir    string
	pods   corelisters.PodLister

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every pod change
}

// NewEnv starts a control plane and the policy's scheduler.
func NewEnv(ctx context.Context, policy Policy, opts EnvOptions) (env *Env, err error) {
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	tb := localcluster.NewProcessTB("sim", out)
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(localcluster.Fatal); ok {
				err = fmt.Errorf("starting the control plane: %s", f)
				tb.RunCleanups()
				return
			}
			panic(r)
		}
	}()
	dir, err := os.MkdirTemp("", "sluice-sim")
	if err != nil {
		return nil, err
	}
	cp, err := localcluster.StartControlPlane(tb, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Env{Client: cp.Client, Policy: policy, tb: tb, cp: cp, cancel: cancel, dir: dir, changed: make(chan struct{})}
	if err := localcluster.CreatePriorityClasses(ctx, cp.Client); err != nil {
		e.Close()
		return nil, err
	}
	// The namespace manifests/ deploys into: the return controller's lease
	// lives there.
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sluice-system"}}, metav1.CreateOptions{}); err != nil {
		e.Close()
		return nil, err
	}
	if err := localcluster.TenantNamespace(ctx, cp.Client, Namespace); err != nil {
		e.Close()
		return nil, err
	}
	if len(opts.CRDs) > 0 {
		if err := localcluster.InstallCRDs(ctx, cp, opts.CRDs...); err != nil {
			e.Close()
			return nil, err
		}
	}
	if opts.Controllers {
		if _, err := kcm.Start(ctx, cp.Config, kcm.Set{Workloads: true}); err != nil {
			e.Close()
			return nil, err
		}
		if _, err := nodesim.Start(ctx, cp.Client, nodesim.Options{StartupDelay: 200 * time.Millisecond, Workers: 8}); err != nil {
			e.Close()
			return nil, err
		}
	}
	if err := e.watchPods(ctx); err != nil {
		e.Close()
		return nil, err
	}
	file := filepath.Join(dir, "scheduler-config.yaml")
	if err := writeConfig(policy.Config, cp.Kubeconfig, file); err != nil {
		e.Close()
		return nil, err
	}
	sched, err := localcluster.RunScheduler(ctx, file)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("policy %s: starting the scheduler: %w", policy.Name, err)
	}
	e.sched = sched
	return e, nil
}

// writeConfig points a scheduler configuration at the control plane, with
// leader election off.
func writeConfig(config []byte, kubeconfig, file string) error {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return fmt.Errorf("scheduler configuration: %w", err)
	}
	doc["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": 5000, "burst": 10000}
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	// Every policy retries a rejected pod after a second at most: the
	// simulator waits on the scheduler's outcomes, and a growing backoff
	// (to 10 s) would be wall-clock time spent on no decision.
	doc["podInitialBackoffSeconds"], doc["podMaxBackoffSeconds"] = 1, 1
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o600)
}

// Close stops labels.Everything() the environment started.
func (e *Env) Close() {
	if e.sched != nil {
		e.sched.Stop()
	}
	e.cancel()
	e.cp.Stop()
	e.tb.RunCleanups()
	_ = os.RemoveAll(e.dir)
}

func (e *Env) watchPods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(e.Client, 0)
	inf := factory.Core().V1().Pods().Informer()
	notify := func(any) {
		e.mu.Lock()
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}); err != nil {
		return err
	}
	e.pods = factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod watch did not sync")
	}
	return nil
}

// changes returns a channel closed at the next pod change.
func (e *Env) changes() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// CreateNodes creates nodes with their status (as a kubelet registers).
func (e *Env) CreateNodes(ctx context.Context, nodes []*v1.Node) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(n *v1.Node) {
			defer wg.Done()
			defer func() { <-sem }()
			created, err := e.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			if err != nil {
				errs <- fmt.Errorf("creating node %s: %w", n.Name, err)
				return
			}
			created.Status = n.Status
			if _, err := e.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				errs <- fmt.Errorf("node %s status: %w", n.Name, err)
			}
		}(n)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Outcome is what the scheduler decided for a pod.
type Outcome struct {
	Node          string
	Unschedulable bool
}

// CreateAndWait creates pods and waits until the scheduler has decided
// every one: bound, or reported unschedulable. It returns the decisions by
// pod name.
func (e *Env) CreateAndWait(ctx context.Context, pods []*v1.Pod, timeout time.Duration) (map[string]Outcome, error) {
	for _, p := range pods {
		if _, err := e.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", p.Name, err)
		}
	}
	return e.Wait(ctx, pods, timeout, false)
}

// Wait waits for the scheduler's decision on pods (bound, or unschedulable
// unless boundOnly) and returns them by pod name.
func (e *Env) Wait(ctx context.Context, pods []*v1.Pod, timeout time.Duration, boundOnly bool) (map[string]Outcome, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	out := map[string]Outcome{}
	for {
		changed := e.changes()
		for _, p := range pods {
			if _, done := out[p.Name]; done {
				continue
			}
			cur, err := e.pods.Pods(p.Namespace).Get(p.Name)
			if err != nil {
				continue
			}
			switch {
			case cur.Spec.NodeName != "":
				out[p.Name] = Outcome{Node: cur.Spec.NodeName}
			case !boundOnly && unschedulable(cur):
				out[p.Name] = Outcome{Unschedulable: true}
			}
		}
		if len(out) == len(pods) {
			return out, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return out, fmt.Errorf("%d of %d pods not decided within %s", len(pods)-len(out), len(pods), timeout)
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

func unschedulable(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// DeletePods deletes pods at once (no grace period).
func (e *Env) DeletePods(ctx context.Context, ns string, names []string) error {
	for _, n := range names {
		err := e.Client.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Pods lists the pods of a namespace from the watch cache.
func (e *Env) Pods(ns string) ([]*v1.Pod, error) {
	return e.pods.Pods(ns).List(labels.Everything())
}
