// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package returns is the return controller: it moves production pods from
// the overflow nodes back to physical ones once room for them has stayed
// free for a hysteresis window, one PodDisruptionBudget-safe wave at a
// time. One runs per scheduler, in its runtime, on the replica that holds
// its Lease.
package returns

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// Controller moves production pods from overflow nodes back to physical ones.
// A pod moves once physical room for it (with room counted for the other
// pods ahead of it) has stayed free for the hysteresis window; capacity
// that flaps resets the window, so pods do not ping-pong. It moves nothing
// while research waits or a research claim runs, and one PDB-respecting
// wave at a time, at most maxPodsPerWave pods, minWaveInterval apart. Its
// replacement lands physical because InferencePacking scores overflow
// nodes last. It runs only where it holds its own Lease, so one of the
// scheduler's replicas moves pods.
type Controller struct {
	cfg Config

	pods  corelisters.PodLister
	nodes corelisters.NodeLister

	fitsSince map[types.UID]time.Time
	wave      *overflow.Wave
	lastWave  time.Time
}

// Claims says whether a research claim is in progress (the claim engine).
type Claims interface {
	Active() bool
}

// Config is what a return controller needs.
type Config struct {
	Return  *config.ReturnConfig
	Classes *overflow.Classes
	// Client talks to the apiserver (Leases); Informers are the
	// scheduler's.
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Waves evicts (reason overflow.MoveReturn).
	Waves *overflow.Waves
	// Claims is the claim engine: no returns while it runs a claim.
	Claims Claims
	// External is the Slurm view (nil without Slurm).
	External capacity.External
}

// New builds a return controller; Run starts it.
func New(cfg Config) *Controller {
	return &Controller{
		cfg:       cfg,
		pods:      cfg.Informers.Core().V1().Pods().Lister(),
		nodes:     cfg.Informers.Core().V1().Nodes().Lister(),
		fitsSince: map[types.UID]time.Time{},
	}
}

// Run competes for the Lease until ctx ends and works while it leads.
func (r *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("return")
	host, _ := os.Hostname()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.cfg.Return.LeaseNamespace, Name: r.cfg.Return.LeaseName},
		Client:     r.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			ReleaseOnCancel: true, Name: "sluice-return",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					logger.Info("Return controller leading")
					r.loop(klog.NewContext(ctx, logger))
				},
				OnStoppedLeading: func() { logger.Info("Return controller stopped leading") },
			},
		})
		if err != nil {
			logger.Error(err, "Return controller cannot elect a leader")
			return
		}
		le.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (r *Controller) loop(ctx context.Context) {
	ticker := time.NewTicker(time.Duration(r.cfg.Return.PollIntervalSeconds) * time.Second)
	defer ticker.Stop()
	for {
		r.tick(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// tick looks once: counts, waits for the running wave, and starts the next.
func (r *Controller) tick(ctx context.Context, now time.Time) {
	logger := klog.FromContext(ctx)
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return
	}
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	byName := make(map[string]*v1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	onOverflow := 0
	for _, p := range pods {
		if r.cfg.Classes.IsProduction(p) && r.cfg.Classes.IsOverflowNode(byName[p.Spec.NodeName]) {
			onOverflow++
		}
	}
	metrics.ProductionOnOverflow.Set(float64(onOverflow))

	if r.wave != nil {
		if !r.cfg.Waves.Done(r.wave) {
			return
		}
		r.wave = nil
	}
	if why := r.researchNeedsRoom(pods); why != "" {
		if len(r.fitsSince) > 0 {
			logger.V(4).Info("No return moves while research waits", "why", why)
		}
		clear(r.fitsSince)
		return
	}
	ready := r.movable(pods, nodes, byName, now)
	if len(ready) == 0 || now.Sub(r.lastWave) < time.Duration(r.cfg.Return.MinWaveIntervalSeconds)*time.Second {
		return
	}
	var moved []*v1.Pod
	for _, p := range r.cfg.Waves.Next(ready, int(r.cfg.Return.MaxPodsPerWave)) {
		note := fmt.Sprintf("physical room for it has been free for %ds; its replacement goes back to a physical node", r.cfg.Return.HysteresisSeconds)
		ok, err := r.cfg.Waves.Evict(ctx, p, note)
		if err != nil {
			logger.Error(err, "Return eviction failed")
			continue
		}
		if ok {
			moved = append(moved, p)
			delete(r.fitsSince, p.UID)
		}
	}
	if len(moved) > 0 {
		metrics.ReturnMoves.Add(float64(len(moved)))
		metrics.OverflowWaves.WithLabelValues(overflow.MoveReturn).Inc()
		r.wave, r.lastWave = &overflow.Wave{Pods: moved, Started: now}, now
		logger.V(2).Info("Return wave started", "pods", len(moved))
	}
}

// researchNeedsRoom says why research may need the physical room: a claim
// in progress, or a research pod waiting to be placed.
func (r *Controller) researchNeedsRoom(pods []*v1.Pod) string {
	if r.cfg.Claims != nil && r.cfg.Claims.Active() {
		return "a research claim is in progress"
	}
	for _, p := range pods {
		if r.cfg.Classes.IsResearch(p) && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && len(p.Spec.SchedulingGates) == 0 {
			return fmt.Sprintf("research pod %s/%s is waiting", p.Namespace, p.Name)
		}
	}
	return ""
}

// movable returns the production pods on overflow nodes whose room on a
// physical node has been free for the hysteresis window, oldest first.
func (r *Controller) movable(pods []*v1.Pod, nodes []*v1.Node, byName map[string]*v1.Node, now time.Time) []*v1.Pod {
	free := r.physicalFree(pods, nodes)
	names := make([]string, 0, len(free))
	for n := range free {
		names = append(names, n)
	}
	sort.Strings(names)
	var candidates []*v1.Pod
	for _, p := range pods {
		if r.cfg.Classes.Eligible(p) && r.cfg.Classes.IsOverflowNode(byName[p.Spec.NodeName]) && podReady(p) {
			candidates = append(candidates, p)
		}
	}
	sort.Slice(candidates, func(i, j int) bool {
		return candidates[i].CreationTimestamp.Before(&candidates[j].CreationTimestamp)
	})
	seen := map[types.UID]bool{}
	var ready []*v1.Pod
	hysteresis := time.Duration(r.cfg.Return.HysteresisSeconds) * time.Second
	for _, p := range candidates {
		seen[p.UID] = true
		shape := capacity.ShapeOf(p)
		req := capacity.RequestsOf(p)
		fits := false
		for _, n := range names {
			if shape.Eligible(byName[n]) && shape.Fit(free[n]) >= 1 {
				free[n] = free[n].Sub(req)
				fits = true
				break
			}
		}
		if !fits {
			delete(r.fitsSince, p.UID)
			continue
		}
		since, ok := r.fitsSince[p.UID]
		if !ok {
			r.fitsSince[p.UID] = now
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

// physicalFree is what is free on Ready, schedulable physical nodes, with
// pods (and research pods nominated there) counted, and what Slurm holds.
func (r *Controller) physicalFree(pods []*v1.Pod, nodes []*v1.Node) map[string]capacity.Resources {
	byNode := map[string][]*v1.Pod{}
	for _, p := range pods {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		node := p.Spec.NodeName
		if node == "" {
			node = p.Status.NominatedNodeName
		}
		if node != "" {
			byNode[node] = append(byNode[node], p)
		}
	}
	free := map[string]capacity.Resources{}
	for _, n := range nodes {
		if r.cfg.Classes.IsOverflowNode(n) || !overflow.NodeReady(n) || n.Spec.Unschedulable {
			continue
		}
		var held map[v1.ResourceName]int64
		if r.cfg.External != nil {
			usable, h := r.cfg.External.NodeExternal(n)
			if !usable {
				continue
			}
			held = h
		}
		ni := framework.NewNodeInfo(byNode[n.Name]...)
		ni.SetNode(n)
		free[n.Name] = capacity.FreeOf(ni, held)
	}
	return free
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
