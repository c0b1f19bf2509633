// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package metrics holds sluice's Prometheus metrics, served by
// kube-scheduler's /metrics endpoint (namespace sluice, stability ALPHA).
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
		Namespace:      namespace,
		Name:           "gang_placement_duration_seconds",
		Help:           "Time from a gang's first placement attempt until all its members are bound.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"api"})
	// GangLeavesSpanned is the number of leaf switches a placed gang spans.
	GangLeavesSpanned = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_leaves_spanned",
		Help:           "Leaf switches a placed gang spans.",
		Buckets:        []float64{1, 2, 3, 4, 6, 8, 12, 16, 32, 64},
		StabilityLevel: metrics.ALPHA,
	}, []string{"api"})
	// GangLeavesOverLowerBound is how many more leaves a placed gang spans
	// than the fewest any placement could have used at its first attempt.
	GangLeavesOverLowerBound = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      namespace,
		Name:           "gang_leaves_over_lower_bound",
		Help:           "Leaves a placed gang spans minus the fewest leaves any placement could use when it was placed.",
		Buckets:        []float64{0, 1, 2, 4, 8, 16},
		StabilityLevel: metrics.ALPHA,
	}, []string{"api"})
	// GangsWaiting is the number of gangs sluice has tried to place that
	// are not fully bound yet.
	GangsWaiting = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Name:           "gangs_waiting",
		Help:           "Gangs with placement attempts whose members are not all bound yet.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"api"})
)

var registerOnce sync.Once

// Register registers every sluice metric with the legacy registry that
// kube-scheduler serves. It is safe to call more than once.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(
			GangPlacementDuration,
			GangLeavesSpanned,
			GangLeavesOverLowerBound,
			GangsWaiting,
		)
	})
}
