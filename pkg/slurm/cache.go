// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/metrics"
)

// Snapshot is Slurm's node table at one moment. It is immutable: a poll
// that finds changes builds a new one.
type Snapshot struct {
	// Nodes by Slurm node name.
	Nodes map[string]*Node
	// Version is the API version it was read with.
	Version string
}

// CacheConfig says how often to poll.
type CacheConfig struct {
	// Interval between polls.
	Interval time.Duration
	// FullRefreshEvery: every this many polls, the whole node table is
	// fetched even if slurmrestd says nothing changed, so a missed change
	// (clock skew on old versions without last_update) cannot linger.
	FullRefreshEvery int
	// Clock measures snapshot ages (a fake one in tests); nil is the
	// real clock.
	Clock clock.PassiveClock
}

// Cache polls slurmrestd into a snapshot that scheduling reads without
// I/O. A failed poll keeps the last good snapshot; its age tells the
// reader how far to trust it.
type Cache struct {
	client *Client
	cfg    CacheConfig

	mu        sync.RWMutex
	snap      *Snapshot
	goodAt    time.Time // when snap was last confirmed current
	lastErr   error
	listeners []func(prev, cur *Snapshot)

	// poll state, used only by the polling goroutine
	updateTime int64
	polls      int
}

// NewCache builds a cache; Run starts polling.
func NewCache(client *Client, cfg CacheConfig) *Cache {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.FullRefreshEvery <= 0 {
		cfg.FullRefreshEvery = 30
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Cache{client: client, cfg: cfg}
}

// OnChange registers f, called after a poll that changed the snapshot,
// after the first good one, and after the first good one following a
// failure, with the previous (maybe nil) and the current one.
// It is also called with (nil, nil) when a poll fails, so readers can
// re-check staleness.
func (c *Cache) OnChange(f func(prev, cur *Snapshot)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, f)
}

// Snapshot returns the last good snapshot (nil before the first), how old
// it is, and the error of the last poll if it failed.
func (c *Cache) Snapshot() (*Snapshot, time.Duration, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.snap == nil {
		return nil, 0, c.lastErr
	}
	return c.snap, c.cfg.Clock.Since(c.goodAt), c.lastErr
}

// Run polls until ctx ends: once at once, then every interval.
func (c *Cache) Run(ctx context.Context) {
	ticker := time.NewTicker(c.cfg.Interval)
	defer ticker.Stop()
	for {
		_ = c.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Poll fetches what changed since the last poll (everything on the first
// poll and every FullRefreshEvery polls) and updates the snapshot.
func (c *Cache) Poll(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	c.polls++
	updateTime := c.updateTime
	if c.polls%c.cfg.FullRefreshEvery == 0 {
		updateTime = 0
	}
	start := c.cfg.Clock.Now()
	res, err := c.client.Nodes(ctx, updateTime)
	if errors.Is(err, errRetryFull) {
		res, err = c.client.Nodes(ctx, 0)
	}
	metrics.SlurmPollDuration.Observe(c.cfg.Clock.Since(start).Seconds())
	if err != nil {
		metrics.SlurmPollErrors.WithLabelValues(Kind(err)).Inc()
		c.mu.Lock()
		c.lastErr = err
		listeners := c.listeners
		age := time.Duration(0)
		if c.snap != nil {
			age = c.cfg.Clock.Since(c.goodAt)
		}
		c.mu.Unlock()
		metrics.SlurmSnapshotAge.Set(age.Seconds())
		logger.V(2).Info("Slurm poll failed; keeping the last good snapshot", "err", err, "snapshotAge", age.Round(time.Second))
		for _, f := range listeners {
			f(nil, nil)
		}
		return err
	}
	for _, w := range res.Warnings {
		logger.V(2).Info("Slurm node data", "warning", w)
	}
	// Ask for changes since slurmctld's own clock when it tells it
	// (v0.0.40+), else since this request started, minus a second for
	// rounding.
	if res.LastUpdate > 0 {
		c.updateTime = res.LastUpdate
	} else {
		c.updateTime = start.Add(-time.Second).Unix()
	}
	c.mu.Lock()
	prev := c.snap
	recovered := c.lastErr != nil
	c.goodAt, c.lastErr = start, nil
	changed := false
	if !res.NotModified {
		snap := &Snapshot{Nodes: make(map[string]*Node, len(res.Nodes)), Version: c.client.Version()}
		unknown := 0
		for i := range res.Nodes {
			n := &res.Nodes[i]
			snap.Nodes[n.Name] = n
			if len(n.UnknownStates) > 0 {
				unknown++
			}
		}
		metrics.SlurmUnknownStateNodes.Set(float64(unknown))
		changed = prev == nil || !sameNodes(prev, snap)
		if changed {
			c.snap = snap
		}
	}
	cur := c.snap
	listeners := c.listeners
	c.mu.Unlock()
	metrics.SlurmSnapshotAge.Set(0)
	metrics.SlurmNodes.Set(float64(len(cur.Nodes)))
	// Readers also hear of a recovery: a snapshot that was too old to
	// trust is current again, even if nothing in it changed.
	if changed || prev == nil || recovered {
		for _, f := range listeners {
			f(prev, cur)
		}
	}
	return nil
}

// sameNodes reports whether two snapshots say the same about every node
// in what sluice reads.
func sameNodes(a, b *Snapshot) bool {
	if len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for name, x := range a.Nodes {
		y, ok := b.Nodes[name]
		if !ok || x.StateString() != y.StateString() || x.Reason != y.Reason || x.Reservation != y.Reservation {
			return false
		}
		xt, xu := x.GPUs("gpu")
		yt, yu := y.GPUs("gpu")
		if xt != yt || xu != yu {
			return false
		}
	}
	return true
}
