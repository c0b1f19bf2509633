// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package metrics

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// Gauge is a gauge read when /metrics is scraped, from state its owner
// keeps anyway (an age that grows by itself, a sum over the cluster that
// would cost more to keep current than to compute when asked).
type Gauge struct{ desc *metrics.Desc }

func newGauge(name, help string, labels ...string) *Gauge {
	return &Gauge{desc: metrics.NewDesc(namespace+"_"+name, help, labels, nil, metrics.ALPHA, "")}
}

// Emit reports one sampled value: g with these label values.
type Emit func(g *Gauge, value float64, labelValues ...string)

// Sampler reports its gauges' values when /metrics is scraped.
type Sampler func(emit Emit)

// The scheduler's sampled gauges.
var (
	// GangOldestWaiting is how long the gang waiting longest has waited.
	GangOldestWaiting = newGauge("gang_oldest_waiting_seconds",
		"Time since the first placement attempt of the gang that has waited longest for all its members to be bound, by profile (0 when none waits).", "profile")
	// ClaimActive is the number of research claims by phase.
	ClaimActive = newGauge("claim_active",
		"Research claims in progress, by phase (Evicting, Paused, Freed; GivenUp claims are not counted).", "phase")
	// ClaimVictimsRemaining is the victims active claims have not moved yet.
	ClaimVictimsRemaining = newGauge("claim_victims_remaining",
		"Production pods that research claims in progress still have to move (evicted or not, their replacement not Ready yet).")
	// ClaimStalled is the longest any active claim has gone without
	// progress.
	ClaimStalled = newGauge("claim_stalled_seconds",
		"Longest time any research claim in progress has gone without moving forward; a claim gives up at claim_wave_timeout_seconds.")
	// ClaimWaveTimeout is the configured wave timeout.
	ClaimWaveTimeout = newGauge("claim_wave_timeout_seconds",
		"The configured claims.waveTimeoutSeconds: a claim without progress this long gives up.")
	// CapacityGPUs is the GPUs of the nodes by who requests them.
	CapacityGPUs = newGauge("capacity_gpus",
		"GPUs by nodes (physical, overflow) and class: requested by running research pods, production pods, other pods, or free (allocatable minus requested).", "nodes", "class")
	// FabricFreeGPUs is the free GPUs under each fabric switch.
	FabricFreeGPUs = newGauge("fabric_free_gpus",
		"Free GPUs (allocatable minus requested) on the physical nodes under each fabric switch that has GPUs, by level and domain.", "level", "domain")
	// FabricLargestFreeGPUs is the free GPUs of the freest domain of a level.
	FabricLargestFreeGPUs = newGauge("fabric_largest_free_gpus",
		"Free GPUs of the fabric domain with the most free GPUs, by level: the largest gang that fits in one domain of the level, in GPUs.", "level")
)

// sampled is a collector of sampled gauges: each owner sets its sampler
// under a key (a later one of the same key replaces it, as when a
// scheduler restarts in the same process).
type sampled struct {
	metrics.BaseStableCollector
	gauges []*Gauge

	mu       sync.Mutex
	gen      uint64
	samplers map[string]samplerEntry
}

type samplerEntry struct {
	gen    uint64
	sample Sampler
}

var schedulerSampled = &sampled{
	gauges:   []*Gauge{GangOldestWaiting, ClaimActive, ClaimVictimsRemaining, ClaimStalled, ClaimWaveTimeout, CapacityGPUs, FabricFreeGPUs, FabricLargestFreeGPUs},
	samplers: map[string]samplerEntry{},
}

// SetSampler makes s report the scheduler's sampled gauges under key
// until remove is called.
func SetSampler(key string, s Sampler) (remove func()) { return schedulerSampled.set(key, s) }

func (c *sampled) set(key string, s Sampler) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	gen := c.gen
	c.samplers[key] = samplerEntry{gen: gen, sample: s}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if cur, ok := c.samplers[key]; ok && cur.gen == gen {
			delete(c.samplers, key)
		}
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (c *sampled) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, g := range c.gauges {
		ch <- g.desc
	}
}

// CollectWithStability implements metrics.StableCollector.
func (c *sampled) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	keys := slices.Sorted(maps.Keys(c.samplers))
	samplers := make([]Sampler, len(keys))
	for i, k := range keys {
		samplers[i] = c.samplers[k].sample
	}
	c.mu.Unlock()
	emit := func(g *Gauge, value float64, labelValues ...string) {
		ch <- metrics.NewLazyConstMetric(g.desc, metrics.GaugeValue, value, labelValues...)
	}
	for _, s := range samplers {
		s(emit)
	}
}

// Reused makes s reuse its last sample for scrapes less than maxAge after
// it: a sampler that sums over the cluster (thousands of nodes) costs the
// scheduler's CPU at every scrape, and scrapers more frequent than maxAge
// (a second Prometheus of an HA pair, a harness gathering every second)
// need not pay it again. With a maxAge below the scrape interval, scrapes
// at the usual intervals (15 s and more) always sample. A sample that
// emitted nothing (its sources not ready) is reused too.
func Reused(s Sampler, maxAge time.Duration, clk clock.PassiveClock) Sampler {
	type value struct {
		gauge  *Gauge
		value  float64
		labels []string
	}
	var (
		mu     sync.Mutex
		at     time.Time
		values []value
	)
	sample := func() []value {
		mu.Lock()
		defer mu.Unlock()
		if values != nil && clk.Since(at) < maxAge {
			return values
		}
		now, fresh := clk.Now(), []value{}
		s(func(g *Gauge, v float64, labelValues ...string) {
			fresh = append(fresh, value{g, v, labelValues})
		})
		at, values = now, fresh
		return values
	}
	return func(emit Emit) {
		for _, v := range sample() {
			emit(v.gauge, v.value, v.labels...)
		}
	}
}
