// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package availability follows how many replicas of each workload serve,
// at every pod event, and sums up phases of a run (a claim, a return):
// each workload's fewest serving replicas and the replica-seconds it spent
// below its spec.replicas. The demo and the bench report these figures.
package availability

import (
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/disruption"
)

// Figures are one workload's during one phase.
type Figures struct {
	// Replicas is its spec.replicas when the phase ended.
	Replicas int `json:"replicas"`
	// MinReady is the fewest replicas serving at once.
	MinReady int `json:"minReady"`
	// BelowSeconds is the integral over the phase of the replicas short
	// of Replicas (replica-seconds).
	BelowSeconds float64 `json:"belowReplicaSeconds"`
}

// Tracker counts serving replicas per workload. Its methods are safe for
// concurrent use; each event is integrated at the time it is given.
type Tracker struct {
	now func() time.Time

	mu      sync.Mutex
	want    map[string]int
	serving map[string]map[string]bool // workload -> pod -> serving
	lastAt  time.Time
	phase   string
	phases  map[string]map[string]*Figures
}

// New returns a tracker reading the time from now (time.Now when nil).
func New(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{now: now, want: map[string]int{}, serving: map[string]map[string]bool{}, phases: map[string]map[string]*Figures{}}
}

// Serving says whether a pod serves: Ready and not being deleted, as a
// budget counts it healthy (disruption.Healthy).
func Serving(p *v1.Pod) bool { return disruption.Healthy(p) }

// Want sets a workload's spec.replicas (tracking it from now on).
func (t *Tracker) Want(workload string, replicas int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.integrateLocked()
	t.want[workload] = replicas
	if f := t.phases[t.phase][workload]; f == nil && t.phase != "" {
		t.phases[t.phase][workload] = &Figures{MinReady: t.readyLocked(workload)}
	}
}

// Observe records whether one pod of a workload serves now; gone pods are
// observed as not serving.
func (t *Tracker) Observe(workload, pod string, serving bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.integrateLocked()
	pods := t.serving[workload]
	if pods == nil {
		pods = map[string]bool{}
		t.serving[workload] = pods
	}
	if serving {
		pods[pod] = true
	} else {
		delete(pods, pod)
	}
	if f := t.phases[t.phase][workload]; f != nil && len(pods) < f.MinReady {
		f.MinReady = len(pods)
	}
}

// Ready is how many replicas of a workload serve now, and its
// spec.replicas.
func (t *Tracker) Ready(workload string) (ready, want int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.readyLocked(workload), t.want[workload]
}

// AllReady says whether every tracked workload serves all its replicas.
func (t *Tracker) AllReady() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for w, want := range t.want {
		if t.readyLocked(w) < want {
			return false
		}
	}
	return true
}

// SetPhase ends the current phase now and starts the named one ("" for
// none). A phase started again starts afresh.
func (t *Tracker) SetPhase(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.integrateLocked()
	t.phase = name
	if name == "" {
		return
	}
	figs := map[string]*Figures{}
	for w := range t.want {
		figs[w] = &Figures{MinReady: t.readyLocked(w)}
	}
	t.phases[name] = figs
}

// Phase is every tracked workload's figures for a phase (up to now if it
// is the current one), or nil if it never started.
func (t *Tracker) Phase(name string) map[string]Figures {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.integrateLocked()
	figs, ok := t.phases[name]
	if !ok {
		return nil
	}
	out := make(map[string]Figures, len(figs))
	for w, f := range figs {
		c := *f
		c.Replicas = t.want[w]
		out[w] = c
	}
	return out
}

// Workloads are the tracked workloads, sorted.
func (t *Tracker) Workloads() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.want))
}

func (t *Tracker) readyLocked(workload string) int { return len(t.serving[workload]) }

// integrateLocked adds the time since the last event to the current
// phase's replica-seconds below spec.
func (t *Tracker) integrateLocked() {
	now := t.now()
	dt := now.Sub(t.lastAt).Seconds()
	if t.lastAt.IsZero() || dt < 0 {
		dt = 0
	}
	t.lastAt = now
	for w, f := range t.phases[t.phase] {
		if short := t.want[w] - t.readyLocked(w); short > 0 && t.phase != "" {
			f.BelowSeconds += float64(short) * dt
		}
	}
}
