// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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

	// pollMu serializes polls (the polling goroutine's and Refresh's); it
	// guards the poll state below.
	pollMu     sync.Mutex
	updateTime int64
	polls      int
	// skew is slurmctld's clock minus this one, measured at full polls
	// of APIs without last_update; skewErr: measuring it failed (logged
	// once).
	skew    time.Duration
	skewErr bool
	// missing are the nodes of the snapshot the last answer lacked;
	// refusedShrink: the last answer was refused for lacking some.
	missing       map[string]bool
	refusedShrink bool
	// unknownSeen are the state words this version does not know that
	// have been logged (once each, at the default level).
	unknownSeen map[string]bool
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
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
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
	var snap *Snapshot
	if err == nil && !res.NotModified {
		snap = &Snapshot{Nodes: make(map[string]*Node, len(res.Nodes)), Version: c.client.Version()}
		for i := range res.Nodes {
			snap.Nodes[res.Nodes[i].Name] = &res.Nodes[i]
		}
		err = c.checkShrink(snap)
	}
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
	// Ask for changes since slurmctld's own clock: its last_update
	// (v0.0.40+), else when this request started by slurmctld's clock
	// (this clock plus the skew its diag showed), minus two seconds for
	// rounding. A 304 carries no time: nothing changed since the time
	// asked for, so the next poll asks for it again. (Taking this clock
	// would skip what slurmctld, if its clock is behind, records before
	// this clock's time.)
	switch {
	case res.NotModified && updateTime > 0:
	case res.LastUpdate > 0:
		c.updateTime = res.LastUpdate
	default:
		if updateTime == 0 {
			c.measureSkew(ctx)
		}
		c.updateTime = start.Add(c.skew - 2*time.Second).Unix()
	}
	c.mu.Lock()
	prev := c.snap
	recovered := c.lastErr != nil
	c.goodAt, c.lastErr = start, nil
	changed := false
	if snap != nil {
		unknown := 0
		for _, n := range snap.Nodes {
			if len(n.UnknownStates) > 0 {
				unknown++
			}
			for _, w := range n.UnknownStates {
				if c.unknownSeen[w] {
					continue
				}
				if c.unknownSeen == nil {
					c.unknownSeen = map[string]bool{}
				}
				c.unknownSeen[w] = true
				logger.Info("Slurm reports a node state this version of sluice does not know: it is ignored, the node is judged by its other states (logged once per state)",
					"state", w, "node", n.Name, "nodeState", n.StateString(), "apiVersion", snap.Version)
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

// measureSkew reads slurmctld's clock (its diag) and keeps how far it is
// from this one. When it cannot, the last skew (at first none) stays, and
// that is said once: a slurmctld clock behind this one then hides changes
// until the next full poll.
func (c *Cache) measureSkew(ctx context.Context) {
	before := c.cfg.Clock.Now()
	ctld, err := c.client.ControllerTime(ctx)
	if err != nil {
		if !c.skewErr {
			klog.FromContext(ctx).Info("Cannot read slurmctld's clock from its diag; asking for node changes by this clock (if slurmctld's is behind, changes may show only at the next full poll)",
				"err", err, "fullPollEvery", c.cfg.FullRefreshEvery)
		}
		c.skewErr = true
		return
	}
	after := c.cfg.Clock.Now()
	c.skew, c.skewErr = time.Unix(ctld, 0).Sub(before.Add(after.Sub(before)/2)), false
}

// checkShrink refuses an answer that lacks nodes the snapshot has and the
// answer before did not lack: slurmrestd does not say when a node is
// deleted, and a list that shrinks at once (an empty list from a
// slurmctld that is restarting, a truncated answer) is far likelier a bad
// answer than a deletion. Refused, it is a failed poll: the last good
// snapshot stays and ages. A node is taken as gone once two answers in a
// row lack it. So that nodes deleted one poll after another (a scale-in)
// cannot fail every poll, an answer right after a refused one is taken,
// with the nodes it newly lacks kept as last seen (they go at the next
// answer that lacks them too).
func (c *Cache) checkShrink(snap *Snapshot) error {
	c.mu.RLock()
	prev := c.snap
	c.mu.RUnlock()
	if prev == nil {
		return nil
	}
	var missing, unconfirmed []string
	for name := range prev.Nodes {
		if _, ok := snap.Nodes[name]; !ok {
			missing = append(missing, name)
			if !c.missing[name] {
				unconfirmed = append(unconfirmed, name)
			}
		}
	}
	refusedLast := c.refusedShrink
	c.missing, c.refusedShrink = map[string]bool{}, false
	for _, name := range missing {
		c.missing[name] = true
	}
	switch {
	case len(unconfirmed) == 0:
		return nil
	case refusedLast:
		for _, name := range unconfirmed {
			snap.Nodes[name] = prev.Nodes[name]
		}
		return nil
	}
	c.refusedShrink = true
	sort.Strings(unconfirmed)
	shown := unconfirmed
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(unconfirmed)-5))
	}
	return &RequestError{Kind: ErrKindGarbage, Err: fmt.Errorf("slurmrestd listed %d nodes where the last good answer had %d (missing: %s); taken as a bad answer until the next one agrees",
		len(snap.Nodes), len(prev.Nodes), strings.Join(shown, ", "))}
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
		// Every GRES, whatever gresName counts (gpu, shard, ...).
		if x.Unreadable != y.Unreadable || !slices.Equal(x.GRES, y.GRES) || !slices.Equal(x.GRESUsed, y.GRESUsed) ||
			!slices.Equal(x.Topology, y.Topology) {
			return false
		}
	}
	return true
}
