// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FabricSource says where the InfiniBand fabric tree comes from:
// "NodeLabels" or "SlurmTopology".
type FabricSource string

// FabricLevel is one switch level of the fabric tree.
type FabricLevel struct {
	// Name is how gangs ask for this level in the sluice.dev/fabric-level
	// annotation, e.g. "leaf".
	Name string `json:"name"`
	// NodeLabel is the node label whose value names the node's switch at
	// this level (source NodeLabels).
	NodeLabel string `json:"nodeLabel,omitempty"`
}

// FabricConfig describes the fabric tree. Every plugin that reasons about
// the fabric takes one; give them the same value.
type FabricConfig struct {
	// Source is NodeLabels (default) or SlurmTopology.
	Source FabricSource `json:"source,omitempty"`
	// Levels are the switch levels from the one nearest the nodes upwards.
	// Default: leaf, spine and block from Topograph's labels
	// network.topology.nvidia.com/leaf, .../spine and .../block.
	Levels []FabricLevel `json:"levels,omitempty"`
	// SlurmTopologyFile is the path of topology.conf, or of saved
	// `scontrol show topology -o` output (source SlurmTopology).
	SlurmTopologyFile *string `json:"slurmTopologyFile,omitempty"`
	// SlurmNodeNameLabel is the node label holding a node's Slurm name;
	// empty means the node name is the Slurm name.
	SlurmNodeNameLabel *string `json:"slurmNodeNameLabel,omitempty"`
	// GPUResourceName is the extended resource that counts GPUs.
	// Default: nvidia.com/gpu.
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
}

// FabricMode is "Required" or "Preferred".
type FabricMode string

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FabricTopologyArgs configures the FabricTopology plugin.
type FabricTopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Fabric is the fabric tree.
	Fabric FabricConfig `json:"fabric"`
	// DefaultLevel is the level of gangs whose PodGroup has no
	// sluice.dev/fabric-level annotation: a level name or "any".
	// Default: any.
	DefaultLevel *string `json:"defaultLevel,omitempty"`
	// DefaultMode is the mode of gangs whose PodGroup has no
	// sluice.dev/fabric-mode annotation. Default: Preferred.
	DefaultMode FabricMode `json:"defaultMode,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs configures the Gang plugin (scheduler-plugins PodGroups).
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultScheduleTimeoutSeconds is how long members of a gang wait at
	// Permit for the rest of the gang when the PodGroup does not set
	// scheduleTimeoutSeconds. Default: 60.
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// RejectedGangBackoffSeconds is how long a gang that was rejected as a
	// whole stays out of the active queue. Default: 10.
	RejectedGangBackoffSeconds *int64 `json:"rejectedGangBackoffSeconds,omitempty"`
}

// SlurmFailureMode is "Closed" or "Open".
type SlurmFailureMode string

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SlurmNodeStateArgs configures the SlurmNodeState plugin.
type SlurmNodeStateArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Endpoint of slurmrestd: http(s)://host:port or unix:///path. Empty
	// (the default) turns the plugin off.
	Endpoint *string `json:"endpoint,omitempty"`
	// APIVersion, e.g. v0.0.38; empty (default) discovers it from
	// /openapi/v3.
	APIVersion *string `json:"apiVersion,omitempty"`
	// User is sent as X-SLURM-USER-NAME with the token.
	User *string `json:"user,omitempty"`
	// TokenFile holds the JWT (X-SLURM-USER-TOKEN); re-read when it
	// changes, never logged. Required for http(s) endpoints.
	TokenFile *string `json:"tokenFile,omitempty"`
	// CAFile verifies an https endpoint (system roots when empty).
	CAFile *string `json:"caFile,omitempty"`
	// ServerName overrides the name checked in the server certificate.
	ServerName *string `json:"serverName,omitempty"`
	// InsecureSkipTLSVerify disables certificate checks. Default false.
	InsecureSkipTLSVerify *bool `json:"insecureSkipTLSVerify,omitempty"`
	// PollIntervalSeconds between polls. Default 10.
	PollIntervalSeconds *int64 `json:"pollIntervalSeconds,omitempty"`
	// RequestTimeoutSeconds bounds one request. Default 5.
	RequestTimeoutSeconds *int64 `json:"requestTimeoutSeconds,omitempty"`
	// MaxStalenessSeconds is how old the last good snapshot may get before
	// FailureMode applies. Default 60.
	MaxStalenessSeconds *int64 `json:"maxStalenessSeconds,omitempty"`
	// FailureMode is Closed (default) or Open.
	FailureMode SlurmFailureMode `json:"failureMode,omitempty"`
	// UnhealthyStates make a node unschedulable. Default DRAIN, DOWN, FAIL,
	// NOT_RESPONDING, MAINTENANCE.
	UnhealthyStates []string `json:"unhealthyStates,omitempty"`
	// NodeNameLabel is the node label holding a node's Slurm name. Default
	// empty: the node name is the Slurm name.
	NodeNameLabel *string `json:"nodeNameLabel,omitempty"`
	// SharedNodeLabel marks nodes where a native slurmd runs beside
	// kubelet (value "true"). Default sluice.dev/slurm-shared.
	SharedNodeLabel *string `json:"sharedNodeLabel,omitempty"`
	// ManagedNodeLabel marks Slurm-managed nodes (value "true"). Default
	// empty: a node is Slurm-managed when the last good snapshot has it.
	ManagedNodeLabel *string `json:"managedNodeLabel,omitempty"`
	// GRESName is the GRES that counts GPUs. Default gpu.
	GRESName *string `json:"gresName,omitempty"`
	// GPUResourceName is the Kubernetes GPU resource. Default nvidia.com/gpu.
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
}

// OverflowConfig says which pods are research and production and which
// nodes are overflow nodes. Give InferencePacking and OverflowPreemption
// the same value.
type OverflowConfig struct {
	// ResearchPriorityClasses name the PriorityClasses of research pods.
	// Default [research].
	ResearchPriorityClasses []string `json:"researchPriorityClasses,omitempty"`
	// ProductionPriorityClasses name the PriorityClasses of production
	// pods. Default [production].
	ProductionPriorityClasses []string `json:"productionPriorityClasses,omitempty"`
	// OverflowNodeSelector is a label selector for overflow nodes. Default
	// type=virtual-kubelet (virtual-kubelet's convention).
	OverflowNodeSelector *string `json:"overflowNodeSelector,omitempty"`
	// OverflowTaintKey is the taint key of overflow nodes; production pods
	// that tolerate it are overflow-eligible. Default
	// virtual-kubelet.io/provider.
	OverflowTaintKey *string `json:"overflowTaintKey,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// InferencePackingArgs configures the InferencePacking plugin.
type InferencePackingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Overflow says what production and overflow nodes are.
	Overflow OverflowConfig `json:"overflow"`
	// Fabric is the fabric tree (for leaves).
	Fabric FabricConfig `json:"fabric"`
}

// ReturnConfig configures the return controller.
type ReturnConfig struct {
	// Enabled turns the controller on. Default true.
	Enabled *bool `json:"enabled,omitempty"`
	// HysteresisSeconds is how long physical room for a pod must stay free
	// before the pod is moved back. Default 120.
	HysteresisSeconds *int64 `json:"hysteresisSeconds,omitempty"`
	// MaxPodsPerWave bounds one wave of moves (PodDisruptionBudgets bound
	// it further). Default 10.
	MaxPodsPerWave *int32 `json:"maxPodsPerWave,omitempty"`
	// MinWaveIntervalSeconds is the least time between waves. Default 30.
	MinWaveIntervalSeconds *int64 `json:"minWaveIntervalSeconds,omitempty"`
	// PollIntervalSeconds is how often the controller looks. Default 5.
	PollIntervalSeconds *int64 `json:"pollIntervalSeconds,omitempty"`
	// LeaseNamespace and LeaseName are the Lease of its leader election.
	// Default sluice-system/sluice-return.
	LeaseNamespace *string `json:"leaseNamespace,omitempty"`
	LeaseName      *string `json:"leaseName,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// OverflowPreemptionArgs configures the OverflowPreemption plugin.
type OverflowPreemptionArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Overflow says what research, production and overflow nodes are.
	Overflow OverflowConfig `json:"overflow"`
	// Fabric is the fabric tree.
	Fabric FabricConfig `json:"fabric"`
	// DefaultLevel is the fabric level of gangs without the annotation
	// (as FabricTopology's). Default any.
	DefaultLevel *string `json:"defaultLevel,omitempty"`
	// DefaultMode is the fabric mode of gangs without the annotation.
	// Default Preferred.
	DefaultMode FabricMode `json:"defaultMode,omitempty"`
	// WaveTimeoutSeconds: a claim whose evictions make no progress for this
	// long is given up. Default 600.
	WaveTimeoutSeconds *int64 `json:"waveTimeoutSeconds,omitempty"`
	// Return configures the return controller.
	Return ReturnConfig `json:"return"`
}
