// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/metrics"
)

// leafLevel is the first switch level, whose spread the metrics report.
const leafLevel = 1

// progress follows gangs from their first placement attempt until all their
// members are bound, for the placement latency and spread metrics and the
// PodGroup's "placed" condition.
type progress struct {
	profile string

	mu    sync.Mutex
	gangs map[gang.Key]*gangProgress
}

type gangProgress struct {
	start time.Time
	// size is the number of members when the gang was last planned.
	size int
	// lowerBound is the fewest leaves any placement could use at the
	// first attempt.
	lowerBound int
	bound      map[types.UID]string
	// attempts counts placement attempts.
	attempts int
}

func newProgress(profile string) *progress {
	return &progress{profile: profile, gangs: map[gang.Key]*gangProgress{}}
}

// sample reports how long the gang waiting longest has waited.
func (p *progress) sample(emit metrics.Emit) {
	p.mu.Lock()
	var oldest time.Time
	for _, g := range p.gangs {
		if oldest.IsZero() || g.start.Before(oldest) {
			oldest = g.start
		}
	}
	p.mu.Unlock()
	age := 0.0
	if !oldest.IsZero() {
		age = time.Since(oldest).Seconds()
	}
	emit(metrics.GangOldestWaiting, age, p.profile)
}

// attempts is how many placement attempts a gang has had.
func (p *progress) attempts(key gang.Key) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.gangs[key]; ok {
		return g.attempts
	}
	return 0
}

// attempt records a placement attempt.
func (p *progress) attempt(key gang.Key, d decision, size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.gangs[key]
	if !ok {
		lb, _ := d.overlay.LowerBound(size, min(leafLevel, d.tree.RootLevel()))
		g = &gangProgress{start: time.Now(), lowerBound: lb, bound: map[types.UID]string{}}
		p.gangs[key] = g
		metrics.GangsWaiting.WithLabelValues(p.profile, string(key.API)).Inc()
	} else if g.lowerBound == 0 {
		// The gang fitted nowhere at first (e.g. until a claim freed
		// room): the bound is the first one that exists.
		g.lowerBound, _ = d.overlay.LowerBound(size, min(leafLevel, d.tree.RootLevel()))
	}
	g.size = size
	g.attempts++
}

// boundMember records a bound member and returns the gang's progress when
// the gang is complete (and forgets it), or nil.
func (p *progress) boundMember(key gang.Key, uid types.UID, node string) *gangProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.gangs[key]
	if !ok {
		return nil
	}
	g.bound[uid] = node
	if len(g.bound) < g.size {
		return nil
	}
	delete(p.gangs, key)
	metrics.GangsWaiting.WithLabelValues(p.profile, string(key.API)).Dec()
	return g
}

func (p *progress) forget(key gang.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.gangs[key]; ok {
		delete(p.gangs, key)
		metrics.GangsWaiting.WithLabelValues(p.profile, string(key.API)).Dec()
	}
}

// PostBind completes a gang's record when its last member is bound: it
// observes the placement latency and the leaves spanned against the lower
// bound, and marks the PodGroup placed.
func (pl *FabricTopology) PostBind(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return
	}
	g := pl.progress.boundMember(key, pod.UID, nodeName)
	if g == nil {
		return
	}
	tree, err := pl.tracker.Tree()
	if err != nil {
		return
	}
	var nodes []int
	for _, n := range g.bound {
		if i, ok := tree.NodeIndex(n); ok {
			nodes = append(nodes, i)
		}
	}
	level := min(leafLevel, tree.RootLevel())
	leaves := tree.Span(nodes, level)
	profile, api := pl.progress.profile, string(key.API)
	metrics.GangPlacementDuration.WithLabelValues(profile, api).Observe(time.Since(g.start).Seconds())
	metrics.GangLeavesSpanned.WithLabelValues(profile, api).Observe(float64(leaves))
	metrics.GangLeavesOverLowerBound.WithLabelValues(profile, api).Observe(float64(max(leaves-g.lowerBound, 0)))
	msg := fmt.Sprintf("%d pods on %d nodes under %d %s switch(es) (fewest possible when first tried: %d) after %s",
		len(g.bound), tree.Span(nodes, fabric.NodeLevel), leaves, tree.LevelName(level), g.lowerBound, time.Since(g.start).Round(time.Millisecond))
	klog.FromContext(ctx).V(2).Info("Gang placed", "gang", key, "summary", msg)
	pl.reporter.SetCondition(key, metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: ReasonPlaced, Message: msg})
}
