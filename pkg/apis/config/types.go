// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FabricSource says where the InfiniBand fabric tree comes from.
type FabricSource string

const (
	// FabricSourceNodeLabels reads each node's switch at every level from a
	// node label, as Topograph, Kueue and KAI label nodes.
	FabricSourceNodeLabels FabricSource = "NodeLabels"
	// FabricSourceSlurmTopology reads the tree from Slurm's topology.conf
	// (topology/tree: SwitchName= Nodes= / Switches=).
	FabricSourceSlurmTopology FabricSource = "SlurmTopology"
)

// FabricLevel is one switch level of the fabric tree.
type FabricLevel struct {
	// Name is how gangs ask for this level in the sluice.dev/fabric-level
	// annotation, e.g. "leaf".
	Name string
	// NodeLabel is the node label whose value names the node's switch at
	// this level (Source NodeLabels). A native PodGroup's topology
	// constraint names a level by this key.
	NodeLabel string
}

// FabricConfig describes the fabric tree and how gangs are placed in it:
// one fact of the whole scheduler, stated once (in any one plugin's args
// that takes it; every other plugin reads it from the scheduler's runtime).
type FabricConfig struct {
	// Source is NodeLabels or SlurmTopology.
	Source FabricSource
	// Levels are the switch levels from the one nearest the nodes upwards,
	// e.g. leaf, spine, block. With SlurmTopology they name the tiers of
	// topology.conf bottom-up (switches with Nodes= are the first level).
	Levels []FabricLevel
	// SlurmTopologyFile is the path of topology.conf (Source SlurmTopology),
	// or of saved `scontrol show topology -o` output. Nodes are found by
	// their Slurm name (the Slurm configuration's nodeNameLabel).
	SlurmTopologyFile string
	// GPUResourceName is the extended resource that counts GPUs, for every
	// plugin (Slurm's GPUs are counted against it too).
	GPUResourceName string
	// DefaultLevel is the level of gangs that ask for none (no topology
	// constraint, no sluice.dev/fabric-level annotation): a level name or
	// "any".
	DefaultLevel string
	// DefaultMode is the mode of gangs that ask for none.
	DefaultMode FabricMode
}

// FabricMode says whether a gang's fabric level is a requirement.
type FabricMode string

const (
	// FabricModeRequired: the gang runs inside one domain of its level or
	// not at all.
	FabricModeRequired FabricMode = "Required"
	// FabricModePreferred: the gang runs in the lowest domain that fits,
	// above its level when nothing at or below it fits.
	FabricModePreferred FabricMode = "Preferred"
)

// FabricLevelAny is the fabric-level value that sets no upper bound.
const FabricLevelAny = "any"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FabricTopologyArgs configures the FabricTopology plugin.
type FabricTopologyArgs struct {
	metav1.TypeMeta

	// Fabric is the fabric tree (nil: stated by another plugin, or the
	// defaults).
	Fabric *FabricConfig
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GangArgs configures the Gang plugin (scheduler-plugins PodGroups).
type GangArgs struct {
	metav1.TypeMeta

	// DefaultScheduleTimeoutSeconds is how long members of a gang wait at
	// Permit for the rest of the gang when the PodGroup does not set
	// scheduleTimeoutSeconds. When it expires the whole gang is rejected
	// and its reserved GPUs are released.
	DefaultScheduleTimeoutSeconds int64
	// RejectedGangBackoffSeconds is how long a gang that was rejected as a
	// whole stays out of the active queue before it is tried again.
	RejectedGangBackoffSeconds int64
}

// SlurmFailureMode says what happens when Slurm's state is too old.
type SlurmFailureMode string

const (
	// SlurmFailClosed makes Slurm-managed nodes unschedulable.
	SlurmFailClosed SlurmFailureMode = "Closed"
	// SlurmFailOpen ignores Slurm.
	SlurmFailOpen SlurmFailureMode = "Open"
)

// SlurmConfig is how sluice reads Slurm and what it makes of Slurm's
// answers: one fact of the whole scheduler, stated once.
type SlurmConfig struct {
	// Endpoint of slurmrestd: http(s)://host:port or unix:///path. Empty
	// turns Slurm off.
	Endpoint string
	// APIVersion, e.g. v0.0.38; empty discovers it from /openapi/v3.
	APIVersion string
	// User is sent as X-SLURM-USER-NAME.
	User string
	// TokenFile holds the JWT (X-SLURM-USER-TOKEN); re-read when it changes.
	TokenFile string
	// CAFile and ServerName verify an https endpoint.
	CAFile     string
	ServerName string
	// InsecureSkipTLSVerify disables certificate checks.
	InsecureSkipTLSVerify bool
	// PollIntervalSeconds between polls of slurmrestd.
	PollIntervalSeconds int64
	// RequestTimeoutSeconds bounds one request.
	RequestTimeoutSeconds int64
	// MaxStalenessSeconds is how old the last good snapshot may get before
	// FailureMode applies.
	MaxStalenessSeconds int64
	// FailureMode is Closed (Slurm-managed nodes unschedulable) or Open
	// (Slurm ignored) once the snapshot is older than MaxStalenessSeconds.
	FailureMode SlurmFailureMode
	// UnhealthyStates are the Slurm states (base states or flags) that make
	// a node unschedulable.
	UnhealthyStates []string
	// NodeNameLabel is the node label holding a node's Slurm name; empty
	// means the node name is the Slurm name. The SlurmTopology fabric
	// source finds nodes by it too.
	NodeNameLabel string
	// SharedNodeLabel marks nodes where a native slurmd runs beside kubelet
	// (label value "true"): the GPUs Slurm jobs hold there are subtracted
	// from what pods may take.
	SharedNodeLabel string
	// ManagedNodeLabel, when set, marks the nodes Slurm manages (value
	// "true"), so failing closed works even before the first snapshot;
	// otherwise a node is Slurm-managed when the last good snapshot has it.
	ManagedNodeLabel string
	// GRESName is the Slurm GRES that counts GPUs.
	GRESName string
	// Commands is the directory of Slurm's client commands, which write
	// instead of slurmrestd when set.
	Commands string
	// Drain makes Kubernetes taking a node away drain it in Slurm (nil:
	// off).
	Drain *SlurmDrainConfig
	// Placeholders holds, in Slurm, the GPUs of pods bound to shared nodes
	// (nil: off).
	Placeholders *SlurmPlaceholderConfig
}

// SlurmPlaceholderConfig says whether a pod bound to a node shared with a
// native slurmd first holds its GPUs in Slurm with a placeholder job, and
// how.
type SlurmPlaceholderConfig struct {
	// Enabled turns placeholder jobs on.
	Enabled bool
	// TimeoutSeconds bounds the wait for a placeholder job to run.
	TimeoutSeconds int64
	// Partition the placeholder jobs are submitted to (empty: Slurm's
	// default partition).
	Partition string
	// ResyncSeconds between two sweeps of the placeholder jobs.
	ResyncSeconds int64
}

// SlurmDrainConfig says whether Kubernetes taking a Slurm node away
// (cordon, NotReady, a NoExecute taint, its slurmd pod being deleted)
// drains it in Slurm, and how.
type SlurmDrainConfig struct {
	// Enabled turns drains on.
	Enabled bool
	// SlurmdPodSelector selects the slurmd pods (label selector; empty:
	// none).
	SlurmdPodSelector string
	// SlurmdNamespaces are the namespaces slurmd pods run in: a pod with
	// their labels elsewhere (a tenant's) drains nothing.
	SlurmdNamespaces []string
	// WritesPerSecond bounds the drains and resumes sent to Slurm.
	WritesPerSecond int32
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SlurmNodeStateArgs configures the SlurmNodeState plugin.
type SlurmNodeStateArgs struct {
	metav1.TypeMeta

	// Slurm is how to read Slurm (nil: stated by another plugin, or Slurm
	// is off).
	Slurm *SlurmConfig
}

// OverflowConfig says which pods are research and production and which
// nodes are overflow nodes: one fact of the whole scheduler, stated once.
type OverflowConfig struct {
	// ResearchPriorityClasses name the PriorityClasses of research pods.
	ResearchPriorityClasses []string
	// ProductionPriorityClasses name the PriorityClasses of production pods.
	ProductionPriorityClasses []string
	// OverflowNodeSelector is a label selector for overflow nodes.
	OverflowNodeSelector string
	// OverflowTaintKey is the taint key of overflow nodes; production pods
	// that tolerate it are overflow-eligible.
	OverflowTaintKey string
	// ResearchNamespaces selects the namespaces whose pods may be research
	// (and so claim production's GPUs); a research-class pod elsewhere is
	// neither research nor production. Nil: every namespace.
	ResearchNamespaces *metav1.LabelSelector
	// ProductionNamespaces selects the namespaces whose pods may be
	// production (and so be moved to the overflow nodes); a
	// production-class pod elsewhere is neither. Nil: every namespace.
	ProductionNamespaces *metav1.LabelSelector
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// InferencePackingArgs configures the InferencePacking plugin.
type InferencePackingArgs struct {
	metav1.TypeMeta

	// Overflow says what production and overflow nodes are (nil: stated
	// by another plugin, or the defaults).
	Overflow *OverflowConfig
	// Fabric is the fabric tree, for leaves (nil: stated by another
	// plugin, or the defaults).
	Fabric *FabricConfig
}

// ClaimsConfig configures the claim engine, which moves production to the
// overflow nodes for research: one per scheduler, stated once.
type ClaimsConfig struct {
	// WaveTimeoutSeconds: a claim whose evictions make no progress for this
	// long is given up (its nominations are dropped).
	WaveTimeoutSeconds int64
	// ReplacementTimeoutSeconds: an evicted victim whose replacement is not
	// placed within this long stops holding its overflow room (its budget
	// stays spent until a replacement is Ready).
	ReplacementTimeoutSeconds int64
	// DefaultMaxUnavailable paces the eviction of pods whose controller
	// has no PodDisruptionBudget, like a rolling update's maxUnavailable:
	// an integer or a percent of the controller's replicas (rounded down,
	// at least 1).
	DefaultMaxUnavailable intstr.IntOrString
	// RetryBackoffSeconds is how long a claimant whose claim was given up
	// waits before planning again; it doubles with each give-up, up to
	// ten times this.
	RetryBackoffSeconds int64
	// MakeBeforeBreak: a victim is evicted only once the overflow node it
	// targets runs a warm instance of it (started from the victim's pod),
	// which its replacement adopts; so production keeps its serving
	// capacity while it moves.
	MakeBeforeBreak bool
	// WarmTimeoutSeconds: a victim whose warm instance is not Ready this
	// long after its claim began is evicted without one (break-before-make,
	// with an Event).
	WarmTimeoutSeconds int64
}

// ReturnConfig configures the return controller, which moves production
// back from overflow nodes when physical capacity frees: one per
// scheduler, stated once.
type ReturnConfig struct {
	// Enabled turns the controller on.
	Enabled bool
	// HysteresisSeconds is how long physical room for a pod must stay free
	// before the pod is moved back.
	HysteresisSeconds int64
	// MaxPodsPerWave bounds one budget's wave of moves.
	MaxPodsPerWave int32
	// MinWaveIntervalSeconds is the least time between two waves of one
	// budget.
	MinWaveIntervalSeconds int64
	// PollIntervalSeconds is how often the controller looks.
	PollIntervalSeconds int64
	// WaveTimeoutSeconds bounds one budget's wave: replacements not Ready
	// by then no longer hold back its next wave.
	WaveTimeoutSeconds int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// OverflowPreemptionArgs configures the OverflowPreemption plugin.
type OverflowPreemptionArgs struct {
	metav1.TypeMeta

	// Overflow says what research, production and overflow nodes are
	// (nil: stated by another plugin, or the defaults).
	Overflow *OverflowConfig
	// Fabric is the fabric tree (nil: stated by another plugin, or the
	// defaults).
	Fabric *FabricConfig
	// Claims configures the claim engine (nil: the defaults).
	Claims *ClaimsConfig
	// Return configures the return controller (nil: the defaults).
	Return *ReturnConfig
}

// Facts are the blocks of one plugin's args that state facts of the whole
// scheduler; nil is "not stated here". A plugin hands its Facts to the
// scheduler's runtime, which refuses two different statements of one fact
// and defaults the facts nobody states.
type Facts struct {
	Fabric   *FabricConfig
	Overflow *OverflowConfig
	Slurm    *SlurmConfig
	Claims   *ClaimsConfig
	Return   *ReturnConfig
}
