// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurmnodestate is the SlurmNodeState plugin: it keeps pods off
// nodes that Slurm has drained, taken down, failed, or reserved for
// maintenance, and stops Kubernetes from handing out GPUs that Slurm jobs
// hold on nodes where slurmd runs beside kubelet. It reads only an
// in-memory snapshot of slurmrestd, polled in the background: Slurm being
// slow or down never blocks a scheduling cycle.
package slurmnodestate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/slurm"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "SlurmNodeState"

// Reasons in statuses and events, for users to grep.
const (
	// ReasonUnhealthy: Slurm has the node in an unhealthy state.
	ReasonUnhealthy = "SlurmNodeUnhealthy"
	// ReasonGPUsHeld: Slurm jobs hold the GPUs the pod needs.
	ReasonGPUsHeld = "SlurmGPUsHeld"
	// ReasonStale: Slurm's state is too old to trust (failing closed).
	ReasonStale = "SlurmStateStale"
	// ReasonIgnored: a pod was bound without Slurm's state, which was too
	// old to trust (failing open).
	ReasonIgnored = "SlurmStateIgnored"
)

// SlurmNodeState is the plugin.
type SlurmNodeState struct {
	handle   fwk.Handle
	args     *config.SlurmNodeStateArgs
	cache    *slurm.Cache
	recorder events.EventRecorder
	gpu      v1.ResourceName
	unhealth []string
	maxAge   time.Duration

	mu       sync.Mutex
	rejected map[string]*v1.Pod // pods rejected for Slurm reasons, by ns/name
	failing  bool               // the snapshot was too old at the last check
	// generation counts new snapshots and changes of failing, what
	// NodeExternal's answers depend on besides the node.
	generation atomic.Uint64
}

var (
	_ fwk.PreFilterPlugin   = &SlurmNodeState{}
	_ fwk.FilterPlugin      = &SlurmNodeState{}
	_ fwk.PreScorePlugin    = &SlurmNodeState{}
	_ fwk.ScorePlugin       = &SlurmNodeState{}
	_ fwk.EnqueueExtensions = &SlurmNodeState{}
	_ fwk.SignPlugin        = &SlurmNodeState{}
	_ fwk.PostBindPlugin    = &SlurmNodeState{}
	_ capacity.External     = &SlurmNodeState{}
)

// New builds the plugin. With no endpoint it is off: every extension point
// skips.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.SlurmNodeStateArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type SlurmNodeStateArgs, got %T", obj)
	}
	path := validation.ArgsPath(h.ProfileName(), Name)
	if err := validation.ValidateSlurmNodeStateArgs(path, args); err != nil {
		return nil, err
	}
	pl := &SlurmNodeState{
		handle:   h,
		args:     args,
		gpu:      v1.ResourceName(args.GPUResourceName),
		unhealth: args.UnhealthyStates,
		maxAge:   time.Duration(args.MaxStalenessSeconds) * time.Second,
		rejected: map[string]*v1.Pod{},
	}
	if args.Endpoint == "" {
		klog.FromContext(ctx).Info("SlurmNodeState is off: no slurmrestd endpoint configured", "profile", h.ProfileName())
		return pl, nil
	}
	metrics.Register()
	cache, err := sharedCache(ctx, h.ClientSet(), args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Child("endpoint"), err)
	}
	pl.cache = cache
	pl.generation.Store(1) // never 0, the generation of "no External"
	pl.recorder = h.EventRecorder()
	cache.OnChange(func(prev, cur *slurm.Snapshot) {
		if cur != nil {
			pl.generation.Add(1)
		}
		pl.snapshotChanged(ctx, cur)
	})
	capacity.SetExternal(h, pl)
	go func() {
		<-ctx.Done()
		capacity.ForgetExternal(h)
	}()
	return pl, nil
}

var (
	cachesMu sync.Mutex
	caches   = map[cacheKey]*slurm.Cache{}
)

type cacheKey struct {
	client kubernetes.Interface
	config string
}

// sharedCache returns one polling cache per scheduler and slurmrestd
// configuration, so both profiles read one snapshot. The first caller
// polls once synchronously (bounded by the request timeout), so scheduling
// starts with Slurm's state when slurmrestd answers.
func sharedCache(ctx context.Context, client kubernetes.Interface, args *config.SlurmNodeStateArgs) (*slurm.Cache, error) {
	cfg := slurm.ClientConfig{
		Endpoint: args.Endpoint, APIVersion: args.APIVersion, User: args.User, TokenFile: args.TokenFile,
		CAFile: args.CAFile, ServerName: args.ServerName, InsecureSkipVerify: args.InsecureSkipTLSVerify,
		Timeout: time.Duration(args.RequestTimeoutSeconds) * time.Second,
	}
	key := cacheKey{client: client, config: fmt.Sprintf("%+v/%d", cfg, args.PollIntervalSeconds)}
	cachesMu.Lock()
	defer cachesMu.Unlock()
	if c, ok := caches[key]; ok {
		return c, nil
	}
	c, err := slurm.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	cache := slurm.NewCache(c, slurm.CacheConfig{Interval: time.Duration(args.PollIntervalSeconds) * time.Second})
	caches[key] = cache
	logger := klog.FromContext(ctx)
	if err := cache.Poll(ctx); err != nil {
		logger.Error(err, "First poll of slurmrestd failed; retrying every poll interval", "endpoint", args.Endpoint)
	} else {
		logger.Info("Reading Slurm node state", "endpoint", args.Endpoint, "apiVersion", c.Version())
	}
	go func() {
		ticker := time.NewTicker(time.Duration(args.PollIntervalSeconds) * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				cachesMu.Lock()
				delete(caches, key)
				cachesMu.Unlock()
				return
			case <-ticker.C:
				_ = cache.Poll(ctx)
			}
		}
	}()
	return cache, nil
}

// Name returns the plugin name.
func (pl *SlurmNodeState) Name() string { return Name }

// view is Slurm's state for one scheduling cycle.
type view struct {
	snap *slurm.Snapshot
	// stale: the snapshot is older than maxStaleness (or there is none)
	// and the plugin fails closed; open: the same, failing open (snap is
	// nil). why says since when and the last error.
	stale, open bool
	why         string
}

// currentView reads the cache and tells whether to fail closed or open.
func (pl *SlurmNodeState) currentView(logger klog.Logger) view {
	v, _ := pl.refreshView(logger)
	return v
}

// refreshView is currentView that also says whether the snapshot just
// became too old to trust, or current again.
func (pl *SlurmNodeState) refreshView(logger klog.Logger) (view, bool) {
	snap, age, lastErr := pl.cache.Snapshot()
	expired := snap == nil || age > pl.maxAge
	mode := string(pl.args.FailureMode)
	pl.mu.Lock()
	changed := expired != pl.failing
	pl.failing = expired
	pl.mu.Unlock()
	if changed {
		pl.generation.Add(1)
		v := 0.0
		if expired {
			v = 1
		}
		metrics.SlurmFailSafe.WithLabelValues(mode).Set(v)
		if expired {
			logger.Info("Slurm state is too old; failing "+strings.ToLower(mode), "age", roundAge(age), "maxStaleness", pl.maxAge, "lastError", lastErr)
		} else {
			logger.Info("Slurm state is current again")
		}
		// Whoever notices first (a scheduling cycle or the poller), the
		// pods rejected under the old verdict are retried under the new.
		pl.retryRejected(logger)
	}
	if !expired {
		return view{snap: snap}, changed
	}
	why := "no snapshot of Slurm's node state yet"
	if snap != nil {
		why = fmt.Sprintf("Slurm's node state is %s old (max %s)", roundAge(age), pl.maxAge)
	}
	if lastErr != nil {
		why += fmt.Sprintf("; last poll: %v", lastErr)
	}
	if pl.args.FailureMode == config.SlurmFailOpen {
		return view{open: true, why: why}, changed
	}
	return view{snap: snap, stale: true, why: why}, changed
}

// PostBind puts an Event on a pod bound while Slurm's state was too old to
// trust and the plugin failed open, so the pods placed without Slurm's
// view can be found (failing closed, the pods that could not be placed
// carry the reason in their FailedScheduling events instead).
func (pl *SlurmNodeState) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if pl.cache == nil || pl.recorder == nil || pl.args.FailureMode != config.SlurmFailOpen {
		return
	}
	if v := pl.currentView(klog.FromContext(ctx)); v.open {
		pl.recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonIgnored, "Binding",
			"bound to %s without Slurm's node state (failureMode Open): %s", nodeName, v.why)
	}
}

// slurmName maps a Kubernetes node to its Slurm node.
func (pl *SlurmNodeState) slurmName(node *v1.Node) string {
	if pl.args.NodeNameLabel != "" {
		if name := node.Labels[pl.args.NodeNameLabel]; name != "" {
			return name
		}
	}
	return node.Name
}

// managed reports whether Slurm manages the node, as far as sluice knows.
func (pl *SlurmNodeState) managed(v view, node *v1.Node) bool {
	if pl.args.ManagedNodeLabel != "" && node.Labels[pl.args.ManagedNodeLabel] == "true" {
		return true
	}
	if v.snap == nil {
		return false
	}
	_, ok := v.snap.Nodes[pl.slurmName(node)]
	return ok
}

// unhealthy returns the first unhealthy state of a Slurm node, or "".
func (pl *SlurmNodeState) unhealthy(n *slurm.Node) string {
	for _, s := range pl.unhealth {
		if n.Has(s) {
			return s
		}
	}
	return ""
}

// heldGPUs is how many GPUs Slurm jobs hold on a node shared with slurmd.
func (pl *SlurmNodeState) heldGPUs(node *v1.Node, n *slurm.Node) int64 {
	if pl.args.SharedNodeLabel == "" || node.Labels[pl.args.SharedNodeLabel] != "true" {
		return 0
	}
	_, used := n.GPUs(pl.args.GRESName)
	return used
}

// NodeExternal tells other plugins (fabric placement, overflow preemption)
// whether pods may use a node and how many GPUs Slurm holds there.
func (pl *SlurmNodeState) NodeExternal(node *v1.Node) (bool, map[v1.ResourceName]int64) {
	v := pl.currentView(klog.Background())
	if v.stale && pl.managed(v, node) {
		return false, nil
	}
	if v.snap == nil {
		return true, nil
	}
	n, ok := v.snap.Nodes[pl.slurmName(node)]
	if !ok {
		return true, nil
	}
	if pl.unhealthy(n) != "" {
		return false, nil
	}
	if held := pl.heldGPUs(node, n); held > 0 {
		return true, map[v1.ResourceName]int64{pl.gpu: held}
	}
	return true, nil
}

// Generation changes with every new snapshot and whenever the snapshot
// becomes too old to trust or current again (checked now).
func (pl *SlurmNodeState) Generation() uint64 {
	pl.currentView(klog.Background())
	return pl.generation.Load()
}

// snapshotChanged moves the pods Slurm kept off nodes back to the active
// queue: the change (or the failed poll that made the state too old to
// trust) may make them schedulable, or unschedulable somewhere else.
func (pl *SlurmNodeState) snapshotChanged(ctx context.Context, cur *slurm.Snapshot) {
	logger := klog.FromContext(ctx)
	if cur == nil {
		// A failed poll changes nothing until it makes the state too old
		// to trust; checked here, as no scheduling cycle may come to
		// notice (refreshView retries the rejected pods when it does).
		pl.refreshView(logger)
		return
	}
	pl.retryRejected(logger)
}

// retryRejected moves the pods Slurm kept off nodes to the active queue.
func (pl *SlurmNodeState) retryRejected(logger klog.Logger) {
	pl.mu.Lock()
	pods := pl.rejected
	pl.rejected = map[string]*v1.Pod{}
	pl.mu.Unlock()
	if len(pods) > 0 && pl.handle != nil {
		logger.V(4).Info("Slurm state changed; retrying pods it rejected", "pods", len(pods))
		pl.handle.Activate(logger, pods)
	}
}

// remember records a pod rejected for a Slurm reason.
func (pl *SlurmNodeState) remember(pod *v1.Pod) {
	pl.mu.Lock()
	pl.rejected[pod.Namespace+"/"+pod.Name] = pod
	pl.mu.Unlock()
}

// SignPod signs the pod's GPU request: Filter's answer for a node depends
// on it (GPUs held by Slurm) and on the node, nothing else of the pod.
func (pl *SlurmNodeState) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	gpus := capacity.ShapeOf(pod).Scalar[pl.gpu]
	return []fwk.SignFragment{{Key: "sluice.dev/SlurmNodeState.GPURequest()", Value: gpus}}, nil
}

// EventsToRegister: besides the Slurm snapshot (which activates the pods
// it rejected), node changes can help: a new node, or a node label that
// maps a node to another Slurm node or marks it shared.
func (pl *SlurmNodeState) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
	}, nil
}

// roundAge rounds an age for messages: to 10 ms below 10 s, else to 1 s.
func roundAge(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}
