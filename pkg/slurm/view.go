// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
)

// ViewConfig says what a View makes of Slurm's answers.
type ViewConfig struct {
	// MaxAge is how old the last good snapshot may get before FailOpen
	// applies.
	MaxAge time.Duration
	// FailOpen ignores Slurm once the snapshot is too old; otherwise
	// (fail closed) Slurm-managed nodes are unusable.
	FailOpen bool
	// UnhealthyStates are the states (base states or flags) that make a
	// node unusable.
	UnhealthyStates []string
	// NodeNameLabel is the Kubernetes node label with the Slurm node name
	// (empty: the node name).
	NodeNameLabel string
	// SharedNodeLabel (value "true") marks nodes where slurmd and kubelet
	// share the GPUs: what Slurm jobs hold there is not for pods.
	SharedNodeLabel string
	// ManagedNodeLabel (value "true") marks nodes Slurm manages even when
	// no snapshot has them.
	ManagedNodeLabel string
	// GRESName is the GRES that counts GPUs; GPUResource the Kubernetes
	// resource that does.
	GRESName    string
	GPUResource v1.ResourceName
}

// View is what the scheduler knows of Slurm: a polled Cache judged by a
// ViewConfig. Every plugin that sizes nodes reads it (it is the scheduler
// runtime's one Slurm view).
type View struct {
	cache *Cache
	cfg   ViewConfig

	mu      sync.Mutex
	failing bool // the snapshot was too old at the last look
	// generation counts new snapshots and flips of failing: what
	// NodeExternal's answers depend on besides the node.
	generation atomic.Uint64
	// onChange hears of every new snapshot and every flip.
	onChange []func()
	// placeholders is how many GPUs placeholder jobs hold for pods bound
	// to a node (nil: none).
	placeholders func(nodeName string) int64
}

// NewView judges cache's snapshots by cfg.
func NewView(cache *Cache, cfg ViewConfig) *View {
	v := &View{cache: cache, cfg: cfg}
	v.generation.Store(1) // never 0, the generation of "no Slurm"
	cache.OnChange(func(prev, cur *Snapshot) {
		if cur == nil {
			// A failed poll changes nothing until it makes the state
			// too old to trust; checked here, as no scheduling cycle
			// may come to notice.
			v.Read(klog.Background())
			return
		}
		v.generation.Add(1)
		v.changed()
	})
	return v
}

// Cache is the polled snapshot the view judges.
func (v *View) Cache() *Cache { return v.cache }

// Config is what the view makes of Slurm's answers.
func (v *View) Config() ViewConfig { return v.cfg }

// OnChange registers f, called after every new snapshot and whenever the
// snapshot becomes too old to trust or current again: when pods Slurm kept
// off nodes may now fit, or no longer.
func (v *View) OnChange(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.onChange = append(v.onChange, f)
}

func (v *View) changed() {
	v.mu.Lock()
	fs := append([]func(){}, v.onChange...)
	v.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// SetPlaceholders tells the view how many GPUs placeholder jobs hold for
// the pods bound to a node: Slurm counts them as used, and so do the pods'
// requests, so HeldGPUs leaves them out.
func (v *View) SetPlaceholders(f func(nodeName string) int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.placeholders = f
}

// Invalidate says that what HeldGPUs answers changed (a pod's placeholder
// came or went): cached answers are dropped, rejected pods retried.
func (v *View) Invalidate() {
	v.generation.Add(1)
	v.changed()
}

// Reading is the view at one moment (one scheduling cycle judges every
// node against one Reading).
type Reading struct {
	// Snap is the last good snapshot (nil before the first, or when
	// failing open).
	Snap *Snapshot
	// Stale: the snapshot is too old (or there is none) and the view fails
	// closed; Open: the same, failing open. Why says since when and the
	// last error.
	Stale, Open bool
	Why         string
}

// Read takes a Reading, noticing (and telling OnChange) when the snapshot
// has just become too old to trust, or current again.
func (v *View) Read(logger klog.Logger) Reading {
	snap, age, lastErr := v.cache.Snapshot()
	expired := snap == nil || age > v.cfg.MaxAge
	mode := "Closed"
	if v.cfg.FailOpen {
		mode = "Open"
	}
	v.mu.Lock()
	flipped := expired != v.failing
	v.failing = expired
	v.mu.Unlock()
	if flipped {
		v.generation.Add(1)
		failsafe := 0.0
		if expired {
			failsafe = 1
		}
		metrics.SlurmFailSafe.WithLabelValues(mode).Set(failsafe)
		if expired {
			logger.Info("Slurm state is too old; failing "+strings.ToLower(mode), "age", RoundAge(age), "maxStaleness", v.cfg.MaxAge, "lastError", lastErr)
		} else {
			logger.Info("Slurm state is current again")
		}
		v.changed()
	}
	if !expired {
		return Reading{Snap: snap}
	}
	why := "no snapshot of Slurm's node state yet"
	if snap != nil {
		why = fmt.Sprintf("Slurm's node state is %s old (max %s)", RoundAge(age), v.cfg.MaxAge)
	}
	if lastErr != nil {
		why += fmt.Sprintf("; last poll: %v", lastErr)
	}
	if v.cfg.FailOpen {
		return Reading{Open: true, Why: why}
	}
	return Reading{Snap: snap, Stale: true, Why: why}
}

// Refresh polls slurmrestd now (a changed-since request: cheap when
// nothing changed), for a writer about to act on what the snapshot says.
func (v *View) Refresh(ctx context.Context) error {
	return v.cache.Poll(ctx)
}

// SlurmName maps a Kubernetes node to its Slurm node.
func (v *View) SlurmName(node *v1.Node) string {
	if v.cfg.NodeNameLabel != "" {
		if name := node.Labels[v.cfg.NodeNameLabel]; name != "" {
			return name
		}
	}
	return node.Name
}

// Labelled reports whether the node carries the managed-node label.
func (v *View) Labelled(node *v1.Node) bool {
	return v.cfg.ManagedNodeLabel != "" && node.Labels[v.cfg.ManagedNodeLabel] == "true"
}

// Managed reports whether Slurm manages the node, as far as r knows.
func (v *View) Managed(r Reading, node *v1.Node) bool {
	if v.Labelled(node) {
		return true
	}
	if r.Snap == nil {
		return false
	}
	_, ok := r.Snap.Nodes[v.SlurmName(node)]
	return ok
}

// Unhealthy returns the first unhealthy state of a Slurm node, or "". A
// node sluice could not read is unhealthy (UnreadableState).
func (v *View) Unhealthy(n *Node) string {
	if n.Unreadable {
		return UnreadableState
	}
	for _, s := range v.cfg.UnhealthyStates {
		if n.Has(s) {
			return s
		}
	}
	return ""
}

// HeldGPUs is how many GPUs Slurm jobs hold on a node shared with slurmd
// (0 on other nodes), besides the placeholder jobs of pods bound there
// (their GPUs are the pods' requests already).
func (v *View) HeldGPUs(node *v1.Node, n *Node) int64 {
	if v.cfg.SharedNodeLabel == "" || node.Labels[v.cfg.SharedNodeLabel] != "true" {
		return 0
	}
	_, used := n.GPUs(v.cfg.GRESName)
	if used == 0 {
		return 0
	}
	v.mu.Lock()
	placeholders := v.placeholders
	v.mu.Unlock()
	if placeholders != nil {
		used -= placeholders(node.Name)
	}
	return max(used, 0)
}

// NodeExternal tells whether pods may use a node at all, and the GPUs Slurm
// holds there (capacity.External, for fabric placement, claims and
// returns).
func (v *View) NodeExternal(node *v1.Node) (bool, map[v1.ResourceName]int64) {
	r := v.Read(klog.Background())
	if r.Stale && v.Managed(r, node) {
		return false, nil
	}
	if r.Snap == nil {
		return true, nil
	}
	n, ok := r.Snap.Nodes[v.SlurmName(node)]
	if !ok {
		// Labelled as Slurm's and not listed: unknown, not used.
		return !v.Labelled(node), nil
	}
	if v.Unhealthy(n) != "" {
		return false, nil
	}
	if held := v.HeldGPUs(node, n); held > 0 {
		return true, map[v1.ResourceName]int64{v.cfg.GPUResource: held}
	}
	return true, nil
}

// Generation changes with every new snapshot and whenever the snapshot
// becomes too old to trust or current again (checked now), so callers can
// cache NodeExternal's answers under it.
func (v *View) Generation() uint64 {
	v.Read(klog.Background())
	return v.generation.Load()
}

// Start polls slurmrestd into the cache: once now, so scheduling starts
// with Slurm's state when slurmrestd answers (bounded by the client's
// request timeout), then every interval until ctx ends.
func (c *Cache) Start(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	if err := c.Poll(ctx); err != nil {
		logger.Error(err, "First poll of slurmrestd failed; retrying every poll interval")
	} else {
		logger.Info("Reading Slurm node state", "apiVersion", c.client.Version())
	}
	go c.run(ctx, interval)
}

func (c *Cache) run(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = c.Poll(ctx)
		}
	}
}

// RoundAge rounds an age for messages: to 10 ms below 10 s, else to 1 s.
func RoundAge(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}
