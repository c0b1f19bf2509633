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
