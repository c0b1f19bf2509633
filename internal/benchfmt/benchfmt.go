// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package benchfmt is the files test/bench writes beside scheduler_perf's
// JSON and cmd/sluice-benchreport reads: written once, so the two cannot
// drift.
package benchfmt

import "github.com/sluice-sched/sluice/internal/availability"

// The files, in the bench's output directory.
const (
	// UsageFile holds []Usage.
	UsageFile = "sluice-process-usage.json"
	// PluginsFile holds sluice's plugin names ([]string).
	PluginsFile = "sluice-plugins.json"
	// RunFile holds the RunInfo.
	RunFile = "sluice-run.json"
	// PlacementFile holds []Placement.
	PlacementFile = "sluice-placement.json"
	// AvailabilityFile holds []Availability.
	AvailabilityFile = "sluice-availability.json"
)

// Usage is one workload's process usage: the CPU seconds the test process
// used (apiserver and scheduler together; etcd runs apart), the wall time
// and the peak RSS during the workload.
type Usage struct {
	Workload   string  `json:"workload"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Seconds    float64 `json:"seconds"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	// Pods is how many pods the workload creates (churn excluded), the
	// denominator of CPU seconds per 1,000 pods.
	Pods int `json:"pods"`
}

// RunInfo is the commit, machine and command of one run.
type RunInfo struct {
	Commit    string   `json:"commit"`
	Date      string   `json:"date"`
	CPUs      int      `json:"cpus"`
	MemoryGiB float64  `json:"memoryGiB"`
	Go        string   `json:"go"`
	Kernel    string   `json:"kernel"`
	Args      []string `json:"args"`
}

// Placement is one workload's gang placement.
type Placement struct {
	Workload string       `json:"workload"`
	BySize   []GangSpread `json:"bySize"`
}

// GangSpread sums up the placed gangs of one size. A gang's lower bound is
// the fewest leaves whose whole free nodes could have held it when its first
// member was bound (the cluster's free nodes then, any spine), computed by
// the bench from node labels and pod requests, not by sluice's code.
type GangSpread struct {
	// Nodes is the gang's size in 8-GPU pods, one node each.
	Nodes int `json:"nodes"`
	Gangs int `json:"gangs"`
	// Leaves and Spines are the mean leaves and spines a gang spans,
	// LowerBound the mean lower bound, AtBound how many gangs span no more
	// leaves than their bound.
	Leaves     float64 `json:"leaves"`
	Spines     float64 `json:"spines"`
	LowerBound float64 `json:"lowerBound"`
	AtBound    int     `json:"atBound"`
}

// Availability is what one ResearchClaim workload measured of production
// while research claimed its GPUs and gave them back.
type Availability struct {
	Workload string `json:"workload"`
	// RemoteStartSeconds is how long the provider took to start a
	// workload.
	RemoteStartSeconds float64 `json:"remoteStartSeconds"`
	// ClaimSeconds runs from the gang's first pod to every gang pod bound
	// (scheduler_perf may delete the gang before every pod reports
	// Running); ReturnSeconds from the gang's end to every replica
	// serving again with none left on the overflow node.
	ClaimSeconds  float64 `json:"claimSeconds"`
	ReturnSeconds float64 `json:"returnSeconds"`
	// Victims are the production pods deleted (evicted or preempted)
	// during the claim; Unplaced those without a node when the whole gang
	// ran; BelowPDB the Deployments whose Ready replicas fell below what
	// their PodDisruptionBudget keeps during the claim.
	Victims  int `json:"victims"`
	Unplaced int `json:"unplaced"`
	BelowPDB int `json:"belowPDB"`
	// Waves is the most eviction waves a ResearchClaim reached (its
	// status.rounds; 0 without one).
	Waves int `json:"waves"`
	// Deployments are each Deployment's figures during both.
	Deployments []DeploymentAvailability `json:"deployments"`
}

// DeploymentAvailability is one Deployment's during a claim and its
// return.
type DeploymentAvailability struct {
	Name   string               `json:"name"`
	Claim  availability.Figures `json:"claim"`
	Return availability.Figures `json:"return"`
	// PDBHealthy is the fewest Ready replicas its PodDisruptionBudget
	// keeps (0: no budget).
	PDBHealthy int `json:"pdbHealthy,omitempty"`
}
