// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package returns is the return controller: it moves production pods from
// the overflow nodes back to physical ones once room for them has stayed
// free for a hysteresis window, one budget-paced wave at a time. One runs
// per scheduler, in its runtime, only on the replica that leads.
package returns

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// Event reasons, for users to grep.
const (
	// ReasonPlanned: on a pod on an overflow node, physical room for it
	// appeared; its hysteresis window starts.
	ReasonPlanned = "ReturnPlanned"
	// ReasonDeferred: on a pod whose window started, the room was taken
	// again before the window ended: it stays.
	ReasonDeferred = "ReturnDeferred"
)

// Controller moves production pods from overflow nodes back to physical
// ones. Where a pod may go is asked of its own profile's Filter plugins
// (Fit), over the physical nodes no live claim holds, with what Slurm
// holds taken out and research first: every research pod waiting that
// fits somewhere is placed before any production pod, so returns take only
// room no waiting research could use. A pod moves once such room has
// stayed free for it for the hysteresis window; capacity that flaps resets
// the window, so pods do not ping-pong. Each budget returns on its own: a
// budget's wave is at most maxPodsPerWave of its pods, no more than it
// allows, minWaveInterval after its last; its next waits while its pods
// settle (disruption.Settling: one being deleted, or a replacement
// starting, each for at most waveTimeoutSeconds). That is read
// from the API, so a new leader waits for its predecessor's waves, and
// for every other actor's moves; only minWaveInterval is this replica's
// memory (a rate, not a safety). No budget waits for another's pods.
type Controller struct {
	cfg Config

	pods  corelisters.PodLister
	nodes corelisters.NodeLister

	fitsSince map[types.UID]time.Time
	// lastWave is when each budget's last wave started, by this replica.
	lastWave map[string]time.Time
}

// Config is what a return controller needs.
type Config struct {
	Return  *config.ReturnConfig
	Classes *overflow.Classes
	// Informers are the scheduler's.
	Informers informers.SharedInformerFactory
	// Ledger says which pods their budgets let go now, counting every
	// actor's disruptions (research claims' too), and evicts them.
	Ledger *disruption.Ledger
	// Claimed reports the nodes live research claims hold: nothing
	// returns there.
	Claimed func(node string) bool
	// External is the Slurm view (nil without Slurm).
	External capacity.External
	// FitFor is the fit check of a scheduler profile by its name; false
	// for a profile that is not this scheduler's.
	FitFor func(schedulerName string) (*Fit, bool)
	// Recorder records Events on pods of timed-out waves.
	Recorder events.EventRecorder
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
}

// New builds a return controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Controller{
		cfg:       cfg,
		pods:      cfg.Informers.Core().V1().Pods().Lister(),
		nodes:     cfg.Informers.Core().V1().Nodes().Lister(),
		fitsSince: map[types.UID]time.Time{},
		lastWave:  map[string]time.Time{},
	}
}

// Run looks every pollIntervalSeconds until ctx ends.
func (r *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("return")
	ctx = klog.NewContext(ctx, logger)
	inf := r.cfg.Informers
	if !cache.WaitForCacheSync(ctx.Done(), inf.Core().V1().Pods().Informer().HasSynced, inf.Core().V1().Nodes().Informer().HasSynced,
		inf.Policy().V1().PodDisruptionBudgets().Informer().HasSynced, inf.Apps().V1().ReplicaSets().Informer().HasSynced,
		inf.Apps().V1().StatefulSets().Informer().HasSynced, inf.Core().V1().ReplicationControllers().Informer().HasSynced) {
		return
	}
	logger.Info("Return controller running")
	ticker := r.cfg.Clock.NewTicker(time.Duration(r.cfg.Return.PollIntervalSeconds) * time.Second)
	defer ticker.Stop()
	for {
		r.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// nodeKind reports whether node name exists and whether it is an
// overflow node.
func (r *Controller) nodeKind(name string) (known, overflow bool) {
	if name == "" {
		return false, false
	}
	n, err := r.nodes.Get(name)
	if err != nil {
		return false, false
	}
	return true, r.cfg.Classes.IsOverflowNode(n)
}

// Tick looks once: counts, waits for the running wave, and starts the next.
func (r *Controller) Tick(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := r.cfg.Clock.Now()
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return
	}
	var onOverflow []*v1.Pod
	for _, p := range pods {
		// By class alone: production whose namespace left the
		// production namespaces is still brought home.
		if !r.cfg.Classes.Production.Has(p.Spec.PriorityClassName) {
			continue
		}
		if _, overflow := r.nodeKind(p.Spec.NodeName); overflow {
			onOverflow = append(onOverflow, p)
		}
	}
	metrics.ProductionOnOverflow.Set(float64(len(onOverflow)))

	for budget, at := range r.lastWave {
		if now.Sub(at) >= time.Duration(r.cfg.Return.MinWaveIntervalSeconds)*time.Second {
			delete(r.lastWave, budget)
		}
	}
	ready := r.movable(ctx, pods, onOverflow, now)
	if len(ready) == 0 {
		return
	}
	moved := map[string][]*v1.Pod{}
	settling := map[string]bool{} // by budget, read once a tick
	window := time.Duration(r.cfg.Return.WaveTimeoutSeconds) * time.Second
	total := 0
	for _, p := range ready {
		budget, why := r.cfg.Ledger.Of(p)
		if why != "" {
			continue // not movable
		}
		waits, known := settling[budget.Name]
		if !known {
			waits = r.cfg.Ledger.Settling(budget, now, window)
			settling[budget.Name] = waits
		}
		if waits {
			continue // its pods still settle from the last move
		}
		if now.Sub(r.lastWave[budget.Name]) < time.Duration(r.cfg.Return.MinWaveIntervalSeconds)*time.Second ||
			len(moved[budget.Name]) >= int(r.cfg.Return.MaxPodsPerWave) {
			continue
		}
		// The ledger counts this wave's evictions, and every other
		// actor's, against the budget.
		mv, why := r.cfg.Ledger.Reserve(p, budget, false)
		if why != "" {
			continue
		}
		note := fmt.Sprintf("physical room for it has been free for %ds; its replacement goes back to a physical node", r.cfg.Return.HysteresisSeconds)
		ok, err := mv.Evict(ctx, disruption.MoveReturn, note)
		if err != nil {
			logger.Error(err, "Return eviction failed")
			continue
		}
		if ok {
			moved[budget.Name] = append(moved[budget.Name], p)
			total++
			delete(r.fitsSince, p.UID)
		}
	}
	if total == 0 {
		return
	}
	for budget, ps := range moved {
		r.lastWave[budget] = now
		metrics.OverflowWaves.WithLabelValues(disruption.MoveReturn).Inc()
		logger.V(2).Info("Return wave started", "budget", budget, "pods", len(ps))
	}
}

func (r *Controller) event(p *v1.Pod, reason, format string, args ...any) {
	if r.cfg.Recorder != nil {
		r.cfg.Recorder.Eventf(p, nil, v1.EventTypeNormal, reason, "Returning", format, args...)
	}
}

// movable returns the production pods on overflow nodes (onOverflow, of
// pods) for which physical room has been free for the hysteresis window,
// oldest first.
func (r *Controller) movable(ctx context.Context, pods, onOverflow []*v1.Pod, now time.Time) []*v1.Pod {
	var candidates []*v1.Pod
	for _, p := range onOverflow {
		if r.cfg.Classes.Returnable(p) && podReady(p) {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		// Nothing to return (nearly always): no look at the nodes, no
		// snapshot of the cluster.
		clear(r.fitsSince)
		return nil
	}
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	snap := r.physicalSnapshot(pods, nodes)
	// Research first: each waiting research pod that fits takes its room.
	for _, p := range pods {
		if !r.cfg.Classes.IsResearch(p) || p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" ||
			p.DeletionTimestamp != nil || len(p.Spec.SchedulingGates) > 0 || terminal(p) {
			continue
		}
		if fit, ok := r.cfg.FitFor(p.Spec.SchedulerName); ok {
			fit.Place(ctx, snap, p)
		}
	}
	// Then production waiting to be placed (the replacements of returns
	// in flight, of every budget): the room they are about to take is
	// not free for another move.
	for _, p := range pods {
		if !r.cfg.Classes.IsProduction(p) || p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" ||
			p.DeletionTimestamp != nil || len(p.Spec.SchedulingGates) > 0 || terminal(p) {
			continue
		}
		if fit, ok := r.cfg.FitFor(p.Spec.SchedulerName); ok {
			fit.Place(ctx, snap, p)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		return candidates[i].CreationTimestamp.Before(&candidates[j].CreationTimestamp)
	})
	seen := map[types.UID]bool{}
	var ready []*v1.Pod
	hysteresis := time.Duration(r.cfg.Return.HysteresisSeconds) * time.Second
	for _, p := range candidates {
		seen[p.UID] = true
		fit, ok := r.cfg.FitFor(p.Spec.SchedulerName)
		if !ok {
			continue
		}
		node, fits := fit.Place(ctx, snap, p)
		if !fits {
			if _, ok := r.fitsSince[p.UID]; ok {
				delete(r.fitsSince, p.UID)
				r.event(p, ReasonDeferred, "the physical room it would return to was taken again before %s passed; it stays until room stays free", hysteresis)
			}
			continue
		}
		since, ok := r.fitsSince[p.UID]
		if !ok {
			r.fitsSince[p.UID] = now
			r.event(p, ReasonPlanned, "room for it on physical node %s (and maybe others); it moves back once room has stayed free for %s", node, hysteresis)
			continue
		}
		if now.Sub(since) >= hysteresis {
			ready = append(ready, p)
		}
	}
	for uid := range r.fitsSince {
		if !seen[uid] {
			delete(r.fitsSince, uid)
		}
	}
	return ready
}

// physicalSnapshot is the physical nodes production may return to (Ready,
// schedulable, usable by Slurm, held by no live claim), each with what
// Slurm holds taken out of its allocatable, and the pods on them (research
// pods nominated there counted as if bound).
func (r *Controller) physicalSnapshot(pods []*v1.Pod, nodes []*v1.Node) *internalcache.Snapshot {
	var keep []*v1.Node
	names := map[string]bool{}
	for _, n := range nodes {
		if r.cfg.Classes.IsOverflowNode(n) || !overflow.NodeReady(n) || n.Spec.Unschedulable || r.cfg.Claimed(n.Name) {
			continue
		}
		if r.cfg.External != nil {
			usable, held := r.cfg.External.NodeExternal(n)
			if !usable {
				continue
			}
			if len(held) > 0 {
				n = withHeld(n, held)
			}
		}
		keep = append(keep, n)
		names[n.Name] = true
	}
	var on []*v1.Pod
	for _, p := range pods {
		if terminal(p) {
			continue
		}
		switch {
		case names[p.Spec.NodeName]:
			on = append(on, p)
		case p.Spec.NodeName == "" && names[p.Status.NominatedNodeName]:
			q := p.DeepCopy()
			q.Spec.NodeName = p.Status.NominatedNodeName
			on = append(on, q)
		}
	}
	return internalcache.NewSnapshot(on, keep)
}

// withHeld is a copy of node whose allocatable leaves out what Slurm holds.
func withHeld(node *v1.Node, held map[v1.ResourceName]int64) *v1.Node {
	n := node.DeepCopy()
	for name, h := range held {
		if q, ok := n.Status.Allocatable[name]; ok {
			n.Status.Allocatable[name] = *resource.NewQuantity(max(q.Value()-h, 0), q.Format)
		}
	}
	return n
}

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

func podReady(p *v1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
