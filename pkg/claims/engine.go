// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package claims is the claim engine: it carries out research claims on
// physical GPUs. A claim, planned by OverflowPreemption when a research pod
// or gang does not fit, names the production pods to move to the overflow
// nodes and where the claimants go; the engine evicts the victims in
// PodDisruptionBudget-safe waves (pkg/overflow.Waves), keeps the claim
// (and so its nominations and its nodes) until the claimants are bound,
// and gives it up when it makes no progress for its timeout. One engine
// runs per scheduler, in its runtime.
package claims

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// ReasonGivenUp is the Event reason on claimants of a claim given up.
const ReasonGivenUp = "ClaimGivenUp"

// Claim is a research pod or gang's claim on physical GPUs: production
// pods to move to overflow nodes, and where the claimants' pods go.
type Claim struct {
	// Key identifies the claimant: "namespace/name" of a pod, or a gang
	// key's String().
	Key string
	// Domain is the fabric domain being freed.
	Domain string
	// Claimants are the research pods the room is for.
	Claimants []*v1.Pod
	// Nominations map claimant (namespace/name) to its node.
	Nominations map[string]string
	// Victims are the production pods to move, in eviction order.
	Victims []*v1.Pod
	// Note says why these victims, for their Events.
	Note string

	pending    []*v1.Pod
	wave       *overflow.Wave
	waves      int
	started    time.Time
	progressAt time.Time
	bound      map[types.UID]bool
}

// Nomination is where a claimant goes, if the claim covers it.
func (c *Claim) Nomination(pod *v1.Pod) (string, bool) {
	node, ok := c.Nominations[pod.Namespace+"/"+pod.Name]
	return node, ok
}

// Config is what an engine needs.
type Config struct {
	// Waves evicts (reason overflow.MovePreemption).
	Waves *overflow.Waves
	// Pods is the scheduler's pod lister (are the claimants still there?).
	Pods corelisters.PodLister
	// Recorder records Events on claimants.
	Recorder events.EventRecorder
	// Timeout: a claim making no progress for this long is given up.
	Timeout time.Duration
	// Activate puts pods back in the active queue (the framework's
	// Activate); nil in tests.
	Activate func(ctx context.Context, pods []*v1.Pod)
	// Clock drives timeouts (a fake one in tests); nil is the real clock.
	Clock clock.WithTicker
}

// Engine runs claims.
type Engine struct {
	cfg Config

	mu     sync.Mutex
	byKey  map[string]*Claim
	byNode map[string]string // node -> claim key, for nodes being freed
}

// NewEngine builds an engine; Run drives it.
func NewEngine(cfg Config) *Engine {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Engine{cfg: cfg, byKey: map[string]*Claim{}, byNode: map[string]string{}}
}

// Get returns the claim of a claimant key, if any.
func (e *Engine) Get(key string) *Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byKey[key]
}

// NodeClaimed reports whether a node is being freed for some claim, so it
// is not planned twice.
func (e *Engine) NodeClaimed(node string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.byNode[node]
	return ok
}

// Active reports whether any claim is in progress.
func (e *Engine) Active() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byKey) > 0
}

// Start starts a claim, taking its victims' nodes and its nominations'.
func (e *Engine) Start(c *Claim) {
	now := e.cfg.Clock.Now()
	c.pending = append([]*v1.Pod(nil), c.Victims...)
	c.started, c.progressAt = now, now
	c.bound = map[types.UID]bool{}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byKey[c.Key] = c
	for _, n := range c.Nominations {
		e.byNode[n] = c.Key
	}
	for _, v := range c.pending {
		e.byNode[v.Spec.NodeName] = c.Key
	}
	metrics.ClaimsActive.Set(float64(len(e.byKey)))
}

// Bound records a claimant bound; the claim ends when all are.
func (e *Engine) Bound(pod *v1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key, c := range e.byKey {
		if _, ok := c.Nomination(pod); !ok {
			continue
		}
		c.bound[pod.UID] = true
		if len(c.bound) >= len(c.Nominations) {
			metrics.ClaimDuration.Observe(e.cfg.Clock.Since(c.started).Seconds())
			metrics.ClaimVictims.Observe(float64(len(c.Victims)))
			metrics.ClaimWaves.Observe(float64(c.waves))
			e.removeLocked(key)
		}
		return
	}
}

func (e *Engine) removeLocked(key string) {
	delete(e.byKey, key)
	for n, k := range e.byNode {
		if k == key {
			delete(e.byNode, n)
		}
	}
	metrics.ClaimsActive.Set(float64(len(e.byKey)))
}

func (e *Engine) remove(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removeLocked(key)
}

// Run advances claims every interval until ctx ends.
func (e *Engine) Run(ctx context.Context, every time.Duration) {
	ticker := e.cfg.Clock.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			e.Step(ctx)
		}
	}
}

// Step advances every claim by at most one wave.
func (e *Engine) Step(ctx context.Context) {
	e.mu.Lock()
	keys := make([]string, 0, len(e.byKey))
	for k := range e.byKey {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		e.step(ctx, k)
	}
}

// step advances one claim. The claim's fields are changed under the lock;
// the API calls (evictions) are made outside it, on a copy of the wave.
func (e *Engine) step(ctx context.Context, key string) {
	logger := klog.FromContext(ctx)
	e.mu.Lock()
	c, ok := e.byKey[key]
	if !ok {
		e.mu.Unlock()
		return
	}
	now := e.cfg.Clock.Now()
	if !e.claimantsExist(c) {
		logger.V(2).Info("Claim dropped: its pods are gone", "claim", c.Key)
		e.removeLocked(c.Key)
		e.mu.Unlock()
		return
	}
	stalled := now.Sub(c.progressAt) > e.cfg.Timeout
	if c.wave != nil {
		if !e.cfg.Waves.Done(c.wave) {
			e.mu.Unlock()
			if stalled {
				e.giveUp(ctx, c, "a wave's replacements did not become Ready")
			}
			return
		}
		c.wave, c.progressAt = nil, now
		stalled = false
		if len(c.pending) == 0 && e.cfg.Activate != nil {
			// The room is free: retry the claimants now rather than when
			// some unrelated event or the periodic flush of unschedulable
			// pods requeues them.
			claimants := c.Claimants
			e.mu.Unlock()
			e.cfg.Activate(ctx, claimants)
			e.mu.Lock()
		}
	}
	if len(c.pending) == 0 {
		e.mu.Unlock()
		// Evictions done; the claim stays (keeping its nominations) until
		// its pods are bound or it times out.
		if stalled {
			e.giveUp(ctx, c, "its pods were not bound after the room was freed")
		}
		return
	}
	next := e.cfg.Waves.Next(c.pending, 0)
	wave := c.waves + 1
	e.mu.Unlock()
	if len(next) == 0 {
		if stalled {
			e.giveUp(ctx, c, "PodDisruptionBudgets allowed no eviction")
		}
		return
	}
	var evicted []*v1.Pod
	for _, v := range next {
		note := fmt.Sprintf("moving to an overflow node so %s gets %s (%s, wave %d)", c.Key, c.Domain, c.Note, wave)
		ok, err := e.cfg.Waves.Evict(ctx, v, note)
		if err != nil {
			logger.Error(err, "Eviction failed", "claim", c.Key)
			continue
		}
		if ok {
			evicted = append(evicted, v)
		}
	}
	if len(evicted) == 0 {
		if stalled {
			e.giveUp(ctx, c, "every eviction it tried failed")
		}
		return
	}
	metrics.OverflowWaves.WithLabelValues(overflow.MovePreemption).Inc()
	e.mu.Lock()
	defer e.mu.Unlock()
	c.waves++
	c.wave = &overflow.Wave{Pods: evicted, Started: now}
	c.progressAt = now
	c.pending = without(c.pending, evicted)
	logger.V(2).Info("Eviction wave started", "claim", c.Key, "wave", c.waves, "evicted", len(evicted), "pending", len(c.pending))
}

// claimantsExist reports whether any claimant still exists (under e.mu).
func (e *Engine) claimantsExist(c *Claim) bool {
	for _, p := range c.Claimants {
		if cur, err := e.cfg.Pods.Pods(p.Namespace).Get(p.Name); err == nil && cur.UID == p.UID {
			return true
		}
	}
	return false
}

func (e *Engine) giveUp(ctx context.Context, c *Claim, why string) {
	klog.FromContext(ctx).Info("Research claim given up", "claim", c.Key, "why", why)
	if e.cfg.Recorder != nil {
		for _, p := range c.Claimants {
			e.cfg.Recorder.Eventf(p, nil, v1.EventTypeWarning, ReasonGivenUp, "Preempting",
				"gave up freeing %s after %s: %s", c.Domain, e.cfg.Timeout, why)
		}
	}
	e.remove(c.Key)
}

func without(pods, drop []*v1.Pod) []*v1.Pod {
	gone := map[types.UID]bool{}
	for _, p := range drop {
		gone[p.UID] = true
	}
	var out []*v1.Pod
	for _, p := range pods {
		if !gone[p.UID] {
			out = append(out, p)
		}
	}
	return out
}
