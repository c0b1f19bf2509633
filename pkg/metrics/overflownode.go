// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// sluice-overflow-node's metrics (subsystem overflow_node), served on its
// own /metrics.
const overflowNode = "overflow_node"

var (
	// RemoteWorkloads is the remote workloads by provider and state
	// (pending, running, ready, succeeded, failed) at the last reconcile.
	RemoteWorkloads = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "remote_workloads",
		Help:           "Remote workloads by provider and state at the last reconcile.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "state"})
	// ProviderHealthy is 1 while a provider is healthy.
	ProviderHealthy = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "provider_healthy",
		Help:           "1 while the provider's health, listing and capacity calls succeed, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	// ReconcileDuration is one reconcile of every provider.
	ReconcileDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "reconcile_duration_seconds",
		Help:           "Time to list every provider and translate every remote workload's state.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// GarbageCollected counts remote workloads deleted because their pod
	// is gone or finished.
	GarbageCollected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "garbage_collected_total",
		Help:           "Remote workloads deleted because their pod is gone or finished.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	// DispatchFailures counts pods a provider could not take, by reason
	// (no_room, unhealthy, unsupported, error).
	DispatchFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "dispatch_failures_total",
		Help:           "Pods a provider could not take, by provider and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "reason"})
	// PodsFailed counts home pods marked Failed, by reason.
	PodsFailed = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "pods_failed_total",
		Help:           "Pods marked Failed so their controllers replace them, by reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// WarmInstances counts what became of warm instances (make-before-
	// break), by provider and outcome: started, adopted, expired (not
	// adopted within the TTL), failed, unwanted (no live claim wants it).
	WarmInstances = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "warm_instances_total",
		Help:           "Warm instances by provider and outcome (started, adopted, expired, failed, unwanted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "outcome"})
)

// Overflow GPU use.
var (
	// RemoteStart is how long a workload takes to serve at its provider.
	RemoteStart = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace,
		Subsystem: overflowNode,
		Name:      "remote_start_seconds",
		Help:      "Time from creating a workload at a provider to the provider reporting it Ready (image pull and model load), by provider and kind (cold: a pod's own; warm: a make-before-break instance).",
		// 1 s to about 2.3 h: a large model loads in tens of minutes.
		Buckets:        metrics.ExponentialBuckets(1, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "kind"})
	// OverflowGPUSeconds counts GPU-seconds run at each provider.
	OverflowGPUSeconds = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "gpu_seconds_total",
		Help:           "GPU-seconds of pods running at each provider (their GPU requests times the time they ran), by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	// OverflowCost counts what the GPU-seconds cost at each provider's
	// pricePerGPUHour.
	OverflowCost = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "cost_total",
		Help:           "Cost of the GPU time run at each provider at its configured pricePerGPUHour, in the currency the price is stated in, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
)

// Providers that are gone.
var (
	// GoneProviderEvictions counts pods evicted, as their budgets
	// allowed, because their provider has not listed its workloads for
	// providerFailureTimeoutSeconds.
	GoneProviderEvictions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "gone_provider_evictions_total",
		Help:           "Pods evicted (as their disruption budgets allowed) because their provider could not be listed for providerFailureTimeoutSeconds, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	// GoneProviderWaiting is the pods at a gone provider waiting for
	// their budgets at the last reconcile.
	GoneProviderWaiting = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "gone_provider_waiting_pods",
		Help:           "Pods at a provider that could not be listed for providerFailureTimeoutSeconds, waiting for their disruption budgets to allow their eviction, at the last reconcile, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
)

// Replicas of an overflow node.
var (
	// OverflowNodeLeader is 1 on the replica that runs the node.
	OverflowNodeLeader = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "leader",
		Help:           "1 on the replica that holds the node's leader Lease and runs the node, 0 on a standby.",
		StabilityLevel: metrics.ALPHA,
	})
	// OverflowNodeLeaseAge is the age of the node's heartbeat Lease, as
	// every replica sees it: past 50 s the node lifecycle controller marks
	// the node NotReady and taints it unreachable.
	OverflowNodeLeaseAge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      overflowNode,
		Name:           "lease_age_seconds",
		Help:           "Seconds since the node's Lease (kube-node-lease) was last renewed, as this replica last read it, by node.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
)

var registerOverflowNodeOnce sync.Once

// overflowNodeMetrics are sluice-overflow-node's metrics.
func overflowNodeMetrics() []metrics.Registerable {
	return []metrics.Registerable{RemoteWorkloads, ProviderHealthy, ReconcileDuration, GarbageCollected, DispatchFailures, PodsFailed, WarmInstances, OverflowGPUSeconds, OverflowCost, RemoteStart, OverflowNodeLeader, OverflowNodeLeaseAge, GoneProviderEvictions, GoneProviderWaiting}
}

// RegisterOverflowNode registers sluice-overflow-node's metrics.
func RegisterOverflowNode() {
	registerOverflowNodeOnce.Do(func() {
		legacyregistry.MustRegister(overflowNodeMetrics()...)
	})
}
