// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Default fabric node labels: Topograph's keys.
const (
	DefaultLeafLabel  = "network.topology.nvidia.com/leaf"
	DefaultSpineLabel = "network.topology.nvidia.com/spine"
	DefaultBlockLabel = "network.topology.nvidia.com/block"
	// DefaultGPUResourceName is the NVIDIA device plugin's resource.
	DefaultGPUResourceName = "nvidia.com/gpu"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_FabricConfig defaults the fabric description.
func SetDefaults_FabricConfig(obj *FabricConfig) {
	if obj.Source == "" {
		obj.Source = "NodeLabels"
	}
	if len(obj.Levels) == 0 {
		obj.Levels = []FabricLevel{
			{Name: "leaf", NodeLabel: DefaultLeafLabel},
			{Name: "spine", NodeLabel: DefaultSpineLabel},
			{Name: "block", NodeLabel: DefaultBlockLabel},
		}
	}
	if obj.SlurmTopologyFile == nil {
		obj.SlurmTopologyFile = ptr.To("")
	}
	if obj.SlurmNodeNameLabel == nil {
		obj.SlurmNodeNameLabel = ptr.To("")
	}
	if obj.GPUResourceName == nil {
		obj.GPUResourceName = ptr.To(DefaultGPUResourceName)
	}
}

// SetDefaults_FabricTopologyArgs defaults FabricTopologyArgs.
func SetDefaults_FabricTopologyArgs(obj *FabricTopologyArgs) {
	if obj.DefaultLevel == nil {
		obj.DefaultLevel = ptr.To("any")
	}
	if obj.DefaultMode == "" {
		obj.DefaultMode = "Preferred"
	}
}

// SetDefaults_GangArgs defaults GangArgs.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.DefaultScheduleTimeoutSeconds == nil {
		obj.DefaultScheduleTimeoutSeconds = ptr.To[int64](60)
	}
	if obj.RejectedGangBackoffSeconds == nil {
		obj.RejectedGangBackoffSeconds = ptr.To[int64](10)
	}
}
