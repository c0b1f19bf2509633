// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	if obj.GPUResourceName == nil {
		obj.GPUResourceName = ptr.To(DefaultGPUResourceName)
	}
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

// DefaultSharedNodeLabel marks nodes where slurmd runs beside kubelet.
const DefaultSharedNodeLabel = "sluice.dev/slurm-shared"

// SetDefaults_SlurmConfig defaults the Slurm connection.
func SetDefaults_SlurmConfig(obj *SlurmConfig) {
	for _, f := range []**string{&obj.Endpoint, &obj.APIVersion, &obj.User, &obj.TokenFile, &obj.CAFile,
		&obj.ServerName, &obj.NodeNameLabel, &obj.ManagedNodeLabel, &obj.Commands} {
		if *f == nil {
			*f = ptr.To("")
		}
	}
	if obj.InsecureSkipTLSVerify == nil {
		obj.InsecureSkipTLSVerify = ptr.To(false)
	}
	if obj.PollIntervalSeconds == nil {
		obj.PollIntervalSeconds = ptr.To[int64](10)
	}
	if obj.RequestTimeoutSeconds == nil {
		obj.RequestTimeoutSeconds = ptr.To[int64](5)
	}
	if obj.MaxStalenessSeconds == nil {
		obj.MaxStalenessSeconds = ptr.To[int64](60)
	}
	if obj.FailureMode == "" {
		obj.FailureMode = "Closed"
	}
	if obj.UnhealthyStates == nil {
		obj.UnhealthyStates = []string{"DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "MAINTENANCE", "BLOCKED", "PLANNED", "INVALID_REG", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}
	}
	if obj.SharedNodeLabel == nil {
		obj.SharedNodeLabel = ptr.To(DefaultSharedNodeLabel)
	}
	if obj.GRESName == nil {
		obj.GRESName = ptr.To("gpu")
	}
	if obj.Drain == nil {
		obj.Drain = &SlurmDrainConfig{}
	}
	if obj.Drain.Enabled == nil {
		obj.Drain.Enabled = ptr.To(false)
	}
	if obj.Drain.SlurmdPodSelector == nil {
		obj.Drain.SlurmdPodSelector = ptr.To("")
	}
	if obj.Drain.WritesPerSecond == nil {
		obj.Drain.WritesPerSecond = ptr.To[int32](5)
	}
	if obj.Placeholders == nil {
		obj.Placeholders = &SlurmPlaceholderConfig{}
	}
	if obj.Placeholders.Enabled == nil {
		obj.Placeholders.Enabled = ptr.To(false)
	}
	if obj.Placeholders.TimeoutSeconds == nil {
		obj.Placeholders.TimeoutSeconds = ptr.To[int64](30)
	}
	if obj.Placeholders.Partition == nil {
		obj.Placeholders.Partition = ptr.To("")
	}
	if obj.Placeholders.ResyncSeconds == nil {
		obj.Placeholders.ResyncSeconds = ptr.To[int64](30)
	}
}

// Overflow defaults: virtual-kubelet's conventions.
const (
	DefaultOverflowNodeSelector = "type=virtual-kubelet"
	DefaultOverflowTaintKey     = "virtual-kubelet.io/provider"
)

// SetDefaults_OverflowConfig defaults the classes and overflow nodes.
func SetDefaults_OverflowConfig(obj *OverflowConfig) {
	if obj.ResearchPriorityClasses == nil {
		obj.ResearchPriorityClasses = []string{"research"}
	}
	if obj.ProductionPriorityClasses == nil {
		obj.ProductionPriorityClasses = []string{"production"}
	}
	if obj.OverflowNodeSelector == nil {
		obj.OverflowNodeSelector = ptr.To(DefaultOverflowNodeSelector)
	}
	if obj.OverflowTaintKey == nil {
		obj.OverflowTaintKey = ptr.To(DefaultOverflowTaintKey)
	}
}

// SetDefaults_ReturnConfig defaults the return controller.
func SetDefaults_ReturnConfig(obj *ReturnConfig) {
	if obj.Enabled == nil {
		obj.Enabled = ptr.To(true)
	}
	if obj.HysteresisSeconds == nil {
		obj.HysteresisSeconds = ptr.To[int64](120)
	}
	if obj.MaxPodsPerWave == nil {
		obj.MaxPodsPerWave = ptr.To[int32](10)
	}
	if obj.MinWaveIntervalSeconds == nil {
		obj.MinWaveIntervalSeconds = ptr.To[int64](30)
	}
	if obj.PollIntervalSeconds == nil {
		obj.PollIntervalSeconds = ptr.To[int64](5)
	}
	if obj.WaveTimeoutSeconds == nil {
		obj.WaveTimeoutSeconds = ptr.To[int64](300)
	}
}

// SetDefaults_ClaimsConfig defaults the claim engine.
func SetDefaults_ClaimsConfig(obj *ClaimsConfig) {
	if obj.WaveTimeoutSeconds == nil {
		obj.WaveTimeoutSeconds = ptr.To[int64](600)
	}
	if obj.ReplacementTimeoutSeconds == nil {
		obj.ReplacementTimeoutSeconds = ptr.To[int64](300)
	}
	if obj.DefaultMaxUnavailable == nil {
		obj.DefaultMaxUnavailable = ptr.To(intstr.FromString("25%"))
	}
	if obj.RetryBackoffSeconds == nil {
		obj.RetryBackoffSeconds = ptr.To[int64](30)
	}
	if obj.MakeBeforeBreak == nil {
		obj.MakeBeforeBreak = ptr.To(true)
	}
	if obj.WarmTimeoutSeconds == nil {
		// Below the claim timeout, whatever that is: half of it, at
		// most 300.
		obj.WarmTimeoutSeconds = ptr.To(max(min(300, *obj.WaveTimeoutSeconds/2), 1))
	}
}
