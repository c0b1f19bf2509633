// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package metrics holds sluice's Prometheus metrics, served by
// kube-scheduler's /metrics endpoint and sluice-overflow-node's: namespace
// sluice, one subsystem per part (gang, slurm, claim, overflow, capacity,
// fabric, overflow_node), a profile label where a metric is per profile,
// stability ALPHA. TestMetricNames lists them and checks their names.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace = "sluice"

var (
	// GangPlacementDuration is the time from a gang's first placement
	// attempt to all its members bound.
	GangPlacementDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace,
		Name:      "gang_placement_duration_seconds",
		Help:      "Time from a gang's first placement attempt until all its members are bound.",
		// 10 ms to about 3 h: a gang waits for a claim's evictions.
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 21),
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "api"})
	// GangLeavesSpanned is the number of leaf switches a placed gang spans.
	GangLeavesSpanned = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_leaves_spanned",
		Help:           "Leaf switches a placed gang spans.",
		Buckets:        []float64{1, 2, 3, 4, 6, 8, 12, 16, 32, 64},
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "api"})
	// GangLeavesOverLowerBound is how many more leaves a placed gang spans
	// than the fewest any placement could have used at its first attempt.
	GangLeavesOverLowerBound = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_leaves_over_lower_bound",
		Help:           "Leaves a placed gang spans minus the fewest leaves any placement could use when it was placed.",
		Buckets:        []float64{0, 1, 2, 4, 8, 16},
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "api"})
	// GangsWaiting is the number of gangs sluice has tried to place that
	// are not fully bound yet.
	GangsWaiting = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "gang_waiting",
		Help:           "Gangs with placement attempts whose members are not all bound yet.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "api"})
)

// Slurm snapshot metrics.
var (
	// SlurmSnapshotAge is the age of the last good Slurm snapshot.
	SlurmSnapshotAge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "slurm_snapshot_age_seconds",
		Help:           "Age of the last good snapshot of Slurm's node states, as of the last poll.",
		StabilityLevel: metrics.ALPHA,
	})
	// SlurmPollDuration is how long a poll of slurmrestd takes.
	SlurmPollDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "slurm_poll_duration_seconds",
		Help:           "Duration of polls of slurmrestd's node API.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	})
	// SlurmPollErrors counts failed polls by kind.
	SlurmPollErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "slurm_poll_errors_total",
		Help:           "Failed polls of slurmrestd by kind (unreachable, timeout, auth, server, garbage, config).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	// SlurmNodes is the number of nodes in the snapshot.
	SlurmNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "slurm_nodes",
		Help:           "Slurm nodes in the last good snapshot.",
		StabilityLevel: metrics.ALPHA,
	})
	// SlurmUnknownStateNodes counts nodes with state words sluice does not know.
	SlurmUnknownStateNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "slurm_unknown_state_nodes",
		Help:           "Slurm nodes whose state has words this sluice does not know (kept, logged at V(2)).",
		StabilityLevel: metrics.ALPHA,
	})
	// SlurmFailSafe is 1 while the snapshot is too old and sluice fails
	// closed or open, by mode.
	SlurmFailSafe = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "slurm_failsafe",
		Help:           "1 while the Slurm snapshot is older than maxStaleness and sluice fails closed (Slurm nodes unschedulable) or open (Slurm ignored).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"mode"})
	// SlurmRejections counts nodes rejected for Slurm reasons.
	SlurmRejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "slurm_node_rejections_total",
		Help:           "Filter rejections of nodes because of Slurm, by profile and reason (state, gpus_held, stale, unlisted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "reason"})
	// SlurmPlaceholderWait is how long a pod's bind waited for its
	// placeholder job, by result.
	SlurmPlaceholderWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "slurm_placeholder_wait_seconds",
		Help:           "Time from submitting a pod's placeholder Slurm job to it running (result running) or to giving up (refused, timeout, error): what the placeholder adds to the pod's bind.",
		Buckets:        []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	// SlurmPlaceholderCancels counts placeholder jobs cancelled, by why.
	SlurmPlaceholderCancels = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "slurm_placeholder_cancels_total",
		Help:           "Placeholder Slurm jobs cancelled, by why (unbound: the pod was not bound; pod_gone: the pod ended or was deleted; orphan: no pod claimed the job in time).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"why"})
	// SlurmPlaceholdersLost counts pods whose placeholder job vanished.
	SlurmPlaceholdersLost = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "slurm_placeholders_lost_total",
		Help:           "Running pods whose placeholder Slurm job was gone (cancelled or ended outside sluice): Slurm may give their GPUs to another job.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Overflow metrics.
var (
	// OverflowEvictions counts production pods evicted, by reason:
	// "preemption" (to an overflow node) or "return" (back to physical).
	OverflowEvictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "overflow_evictions_total",
		Help:           "Production pods evicted through the Eviction API, by reason (preemption: to overflow nodes; return: back to physical nodes).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// OverflowWaves counts eviction waves, by reason.
	OverflowWaves = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Name:           "overflow_waves_total",
		Help:           "PodDisruptionBudget-respecting eviction waves started, by reason (preemption, return).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// ProductionOnOverflow is the number of production pods on overflow nodes.
	ProductionOnOverflow = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "overflow_production_pods",
		Help:           "Production pods bound to overflow nodes, as the return controller last counted.",
		StabilityLevel: metrics.ALPHA,
	})
	// ClaimDuration is the time from a research claim to the room it
	// claimed being free.
	ClaimDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace,
		Name:      "claim_duration_seconds",
		Help:      "Time from a research gang or pod claiming physical GPUs (evicting production) to the claimed room being free (every victim moved), or to its pods bound if that came first.",
		// 1 s to about 9 h: a claim of thousands of victims paced by
		// their budgets takes hours.
		Buckets:        metrics.ExponentialBuckets(1, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// ClaimVictims is the number of production pods a claim evicted.
	ClaimVictims = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "claim_victims",
		Help:           "Production pods moved to overflow nodes per completed research claim.",
		Buckets:        metrics.ExponentialBuckets(1, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	// ClaimWaves is the number of eviction waves of a claim.
	ClaimWaves = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "claim_waves",
		Help:           "PodDisruptionBudget-respecting eviction waves per completed research claim.",
		Buckets:        []float64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233},
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// schedulerMetrics are the metrics sluice adds to kube-scheduler's, besides
// the sampled gauges.
func schedulerMetrics() []metrics.Registerable {
	return []metrics.Registerable{
		GangPlacementDuration, GangLeavesSpanned, GangLeavesOverLowerBound, GangsWaiting,
		SlurmSnapshotAge, SlurmPollDuration, SlurmPollErrors, SlurmNodes, SlurmUnknownStateNodes, SlurmFailSafe,
		SlurmRejections, SlurmPlaceholderWait, SlurmPlaceholderCancels, SlurmPlaceholdersLost,
		OverflowEvictions, OverflowWaves, ProductionOnOverflow,
		ClaimDuration, ClaimVictims, ClaimWaves,
	}
}

// Register registers every sluice metric with the legacy registry that
// kube-scheduler serves. It is safe to call more than once.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(schedulerMetrics()...)
		legacyregistry.CustomMustRegister(schedulerSampled)
	})
}
