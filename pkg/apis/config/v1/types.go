// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Each fact of the whole scheduler (the fabric, the workload classes and
// overflow nodes, the Slurm connection, the claim engine and the return
// controller) is a block that several plugins' args may carry: state it
// once, in any one of them, and the others read it from the scheduler's
// runtime. A block stated twice with different values stops the scheduler
// at start-up, naming both places; a block stated nowhere takes its
// defaults. (kube-scheduler's pluginConfig is per profile, so a fact both
// profiles need cannot live in one place of its schema otherwise.)

// FabricSource says where the InfiniBand fabric tree comes from:
// "NodeLabels" or "SlurmTopology".
type FabricSource string

// FabricLevel is one switch level of the fabric tree.
type FabricLevel struct {
	// Name is how gangs ask for this level in the sluice.dev/fabric-level
	// annotation, e.g. "leaf".
	Name string `json:"name"`
	// NodeLabel is the node label whose value names the node's switch at
	// this level (source NodeLabels). A native PodGroup's topology
	// constraint names a level by this key.
	NodeLabel string `json:"nodeLabel,omitempty"`
}

// FabricConfig describes the fabric tree and the placement of gangs that
// ask for no level.
type FabricConfig struct {
	// Source is NodeLabels (default) or SlurmTopology.
	Source FabricSource `json:"source,omitempty"`
	// Levels are the switch levels from the one nearest the nodes upwards.
	// Default: leaf, spine and block from Topograph's labels
	// network.topology.nvidia.com/leaf, .../spine and .../block.
	Levels []FabricLevel `json:"levels,omitempty"`
	// SlurmTopologyFile is the path of topology.conf, or of saved
	// `scontrol show topology -o` output (source SlurmTopology). Nodes are
	// found by their Slurm name (the Slurm block's nodeNameLabel).
	SlurmTopologyFile *string `json:"slurmTopologyFile,omitempty"`
	// GPUResourceName is the extended resource that counts GPUs, for
	// every plugin. Default: nvidia.com/gpu.
	GPUResourceName *string `json:"gpuResourceName,omitempty"`
	// DefaultLevel is the level of gangs that ask for none: a level name
	// or "any". Default: any.
	DefaultLevel *string `json:"defaultLevel,omitempty"`
	// DefaultMode is the mode of gangs that ask for none: Required or
	// Preferred (default).
	DefaultMode FabricMode `json:"defaultMode,omitempty"`
}

// FabricMode is "Required" or "Preferred".
type FabricMode string

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FabricTopologyArgs configures the FabricTopology plugin.
type FabricTopologyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Fabric is the fabric tree.
	Fabric *FabricConfig `json:"fabric,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs configures the Gang plugin (scheduler-plugins PodGroups).
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultScheduleTimeoutSeconds is how long placed members wait for
	// the rest of their gang when the PodGroup sets no
	// scheduleTimeoutSeconds. Default: 60.
	DefaultScheduleTimeoutSeconds *int64 `json:"defaultScheduleTimeoutSeconds,omitempty"`
	// RejectedGangBackoffSeconds is how long a gang rejected as a whole
	// stays out of the queue. Default: 10.
	RejectedGangBackoffSeconds *int64 `json:"rejectedGangBackoffSeconds,omitempty"`
}

// SlurmFailureMode is "Closed" or "Open".
type SlurmFailureMode string

// SlurmConfig is how sluice reads Slurm and what it makes of Slurm's
// answers.
type SlurmConfig struct {
	// Endpoint of slurmrestd: http(s)://host:port or unix:///path.
	// Default: empty, Slurm off.
	Endpoint *string `json:"endpoint,omitempty"`
	// APIVersion, e.g. v0.0.38. Default: discovered from /openapi/v3.
	APIVersion *string `json:"apiVersion,omitempty"`
	// User is sent as X-SLURM-USER-NAME. Default: empty.
	User *string `json:"user,omitempty"`
	// TokenFile holds the JWT sent as X-SLURM-USER-TOKEN, re-read when it
	// changes and never logged. Default: empty (no token, e.g. unix
	// socket with local auth).
	TokenFile *string `json:"tokenFile,omitempty"`
	// CAFile verifies an https endpoint's certificate.
	CAFile *string `json:"caFile,omitempty"`
	// ServerName overrides the name checked in the certificate.
	ServerName *string `json:"serverName,omitempty"`
	// InsecureSkipTLSVerify disables certificate checks. Default: false.
	InsecureSkipTLSVerify *bool `json:"insecureSkipTLSVerify,omitempty"`
	// PollIntervalSeconds between polls. Default: 10.
	PollIntervalSeconds *int64 `json:"pollIntervalSeconds,omitempty"`
	// RequestTimeoutSeconds bounds one request. Default: 5.
	RequestTimeoutSeconds *int64 `json:"requestTimeoutSeconds,omitempty"`
	// MaxStalenessSeconds is how old the last good snapshot may get
	// before failureMode applies. Default: 60.
	MaxStalenessSeconds *int64 `json:"maxStalenessSeconds,omitempty"`
	// FailureMode is Closed (default) or Open.
	FailureMode SlurmFailureMode `json:"failureMode,omitempty"`
	// UnhealthyStates keep pods off a node. Default: DRAIN, DOWN, FAIL,
	// NOT_RESPONDING, MAINTENANCE (broken), and BLOCKED, PLANNED,
	// INVALID_REG, REBOOT_REQUESTED, REBOOT_ISSUED, POWER_DOWN, POWERING_DOWN,
	// POWERED_DOWN (claimed by Slurm: a job planned there, a reboot or a
	// power-down coming). REBOOT_CANCELED is not: no reboot follows.
	UnhealthyStates []string `json:"unhealthyStates,omitempty"`
	// NodeNameLabel is the node label with the Slurm node name. Default:
	// empty, the node name.
	NodeNameLabel *string `json:"nodeNameLabel,omitempty"`
	// SharedNodeLabel marks nodes shared with a native slurmd. Default:
	// sluice.dev/slurm-shared.
	SharedNodeLabel *string `json:"sharedNodeLabel,omitempty"`
	// ManagedNodeLabel marks nodes Slurm manages even when missing from
	// the snapshot. Default: empty.
	ManagedNodeLabel *string `json:"managedNodeLabel,omitempty"`
	// GRESName is the GRES that counts GPUs. Default: gpu.
	GRESName *string `json:"gresName,omitempty"`
	// Commands is the directory of Slurm's client commands (scontrol,
	// sbatch, squeue, scancel), which then write to Slurm instead of
	// slurmrestd: Slurm 22.05's API (v0.0.37, v0.0.38) can neither update
	// nodes nor pin a job to a node; v0.0.39 and later can. They must reach
	// slurmctld (slurm.conf and munge). Default: empty, slurmrestd.
	Commands *string `json:"commands,omitempty"`
	// Drain makes Kubernetes taking a node away drain it in Slurm.
	// Default: off.
	Drain *SlurmDrainConfig `json:"drain,omitempty"`
	// Placeholders holds, in Slurm, the GPUs of pods bound to nodes shared
	// with a native slurmd (sharedNodeLabel). Default: off.
	Placeholders *SlurmPlaceholderConfig `json:"placeholders,omitempty"`
}

// SlurmPlaceholderConfig says whether a pod that needs GPUs, bound to a
// node shared with a native slurmd, first holds them in Slurm: sluice
// submits a placeholder job (name sluice-<pod UID>) pinned to the node with
// the pod's GPU count, waits until it runs, records its GPU indices on the
// pod and binds; the job is cancelled when the pod ends. A pod whose job
// does not run in time is not bound there.
type SlurmPlaceholderConfig struct {
	// Enabled turns placeholder jobs on. Default: false.
	Enabled *bool `json:"enabled,omitempty"`
	// TimeoutSeconds bounds the wait for a placeholder job to run.
	// Default: 30.
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
	// Partition the placeholder jobs go to; its time limit applies to
	// them, so it should have none. Default: empty, Slurm's default
	// partition.
	Partition *string `json:"partition,omitempty"`
	// ResyncSeconds between two sweeps that cancel placeholder jobs whose
	// pods are gone and report pods whose job is gone (pods ending trigger
	// one too). Default: 30.
	ResyncSeconds *int64 `json:"resyncSeconds,omitempty"`
}

// SlurmDrainConfig says whether Kubernetes taking a Slurm node away
// (cordon, NotReady, a NoExecute taint, its slurmd pod being deleted)
// drains it in Slurm, with reason "sluice: <why>", and resumes it when the
// cause clears. Only drains whose reason starts with "sluice:" are ever
// resumed.
type SlurmDrainConfig struct {
	// Enabled turns drains on. Default: false.
	Enabled *bool `json:"enabled,omitempty"`
	// SlurmdPodSelector is a label selector of the slurmd pods (slurmd in
	// pods, e.g. app.kubernetes.io/name=slurmd); a node whose slurmd pod is
	// being deleted is drained. Default: empty, none.
	SlurmdPodSelector *string `json:"slurmdPodSelector,omitempty"`
	// SlurmdNamespaces are the namespaces slurmd pods run in; a pod with
	// their labels anywhere else drains nothing. Required with a
	// slurmdPodSelector.
	SlurmdNamespaces []string `json:"slurmdNamespaces,omitempty"`
	// WritesPerSecond bounds how many drains and resumes are sent to
	// Slurm. Default: 5.
	WritesPerSecond *int32 `json:"writesPerSecond,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SlurmNodeStateArgs configures the SlurmNodeState plugin.
type SlurmNodeStateArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Slurm is how to read Slurm.
	Slurm *SlurmConfig `json:"slurm,omitempty"`
}

// OverflowConfig says which pods are research and production and which
// nodes are overflow nodes.
type OverflowConfig struct {
	// ResearchPriorityClasses. Default: [research].
	ResearchPriorityClasses []string `json:"researchPriorityClasses,omitempty"`
	// ProductionPriorityClasses. Default: [production].
	ProductionPriorityClasses []string `json:"productionPriorityClasses,omitempty"`
	// OverflowNodeSelector selects overflow nodes. Default:
	// type=virtual-kubelet.
	OverflowNodeSelector *string `json:"overflowNodeSelector,omitempty"`
	// OverflowTaintKey is tolerated by overflow-eligible production.
	// Default: virtual-kubelet.io/provider.
	OverflowTaintKey *string `json:"overflowTaintKey,omitempty"`
	// ResearchNamespaces selects the namespaces whose pods may be research
	// and so claim; a research-class pod elsewhere is neither research nor
	// production for sluice. Default: every namespace.
	ResearchNamespaces *metav1.LabelSelector `json:"researchNamespaces,omitempty"`
	// ProductionNamespaces selects the namespaces whose pods may be
	// production and so be moved to the overflow nodes. Default: every
	// namespace.
	ProductionNamespaces *metav1.LabelSelector `json:"productionNamespaces,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// InferencePackingArgs configures the InferencePacking plugin.
type InferencePackingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Overflow says what production and overflow nodes are.
	Overflow *OverflowConfig `json:"overflow,omitempty"`
	// Fabric is the fabric tree (for leaves).
	Fabric *FabricConfig `json:"fabric,omitempty"`
}

// ClaimsConfig configures the claim engine.
type ClaimsConfig struct {
	// WaveTimeoutSeconds: how long a claim's evictions may make no
	// progress before it is given up. Default: 600.
	WaveTimeoutSeconds *int64 `json:"waveTimeoutSeconds,omitempty"`
	// ReplacementTimeoutSeconds: how long an evicted victim's overflow
	// room is held for its replacement to be placed. Its budget stays
	// spent until a replacement is Ready, whatever this says. Default: 300.
	ReplacementTimeoutSeconds *int64 `json:"replacementTimeoutSeconds,omitempty"`
	// DefaultMaxUnavailable paces pods whose controller has no
	// PodDisruptionBudget: an integer or a percent of the controller's
	// replicas (rounded down, at least 1). Default: 25%.
	DefaultMaxUnavailable *intstr.IntOrString `json:"defaultMaxUnavailable,omitempty"`
	// RetryBackoffSeconds before a claimant whose claim was given up plans
	// again; doubles with each give-up, up to ten times. Default: 30.
	RetryBackoffSeconds *int64 `json:"retryBackoffSeconds,omitempty"`
	// MakeBeforeBreak: a victim is evicted only once its overflow node
	// runs a warm instance of it, which its replacement adopts.
	// Default: true.
	MakeBeforeBreak *bool `json:"makeBeforeBreak,omitempty"`
	// WarmTimeoutSeconds: a victim whose warm instance is not Ready this
	// long after its claim began is evicted without one. Must be below
	// waveTimeoutSeconds. Default: 300, or half of waveTimeoutSeconds
	// when that is below 600.
	WarmTimeoutSeconds *int64 `json:"warmTimeoutSeconds,omitempty"`
}

// ReturnConfig configures the return controller.
type ReturnConfig struct {
	// Enabled. Default: true.
	Enabled *bool `json:"enabled,omitempty"`
	// HysteresisSeconds physical room must stay free. Default: 120.
	HysteresisSeconds *int64 `json:"hysteresisSeconds,omitempty"`
	// MaxPodsPerWave bounds one budget's wave (each budget returns on
	// its own). Default: 10.
	MaxPodsPerWave *int32 `json:"maxPodsPerWave,omitempty"`
	// MinWaveIntervalSeconds between two waves of one budget. Default: 30.
	MinWaveIntervalSeconds *int64 `json:"minWaveIntervalSeconds,omitempty"`
	// PollIntervalSeconds. Default: 5.
	PollIntervalSeconds *int64 `json:"pollIntervalSeconds,omitempty"`
	// WaveTimeoutSeconds bounds how long a starting replacement (a pod of
	// the controller created this recently, not Ready) holds its budget's
	// next wave. Default: 300.
	WaveTimeoutSeconds *int64 `json:"waveTimeoutSeconds,omitempty"`
}

// +k8s:defaulter-gen=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// OverflowPreemptionArgs configures the OverflowPreemption plugin.
type OverflowPreemptionArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Overflow says what research, production and overflow nodes are.
	Overflow *OverflowConfig `json:"overflow,omitempty"`
	// Fabric is the fabric tree.
	Fabric *FabricConfig `json:"fabric,omitempty"`
	// Claims configures the claim engine.
	Claims *ClaimsConfig `json:"claims,omitempty"`
	// Return configures the return controller.
	Return *ReturnConfig `json:"return,omitempty"`
}
