// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package scheme

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

// decode decodes plugin args the way kube-scheduler does: strictly, then
// defaulted, then converted to the internal types plugins receive.
func decode(t *testing.T, kind, args string) runtime.Object {
	t.Helper()
	s := runtime.NewScheme()
	AddToScheme(s)
	data, err := yaml.YAMLToJSON([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: " + kind + "\n" + args))
	if err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(s, serializer.EnableStrict)
	obj, _, err := codecs.UniversalDecoder(config.SchemeGroupVersion).Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	return obj
}

// TestDefaults: what every args kind defaults to, and that a fact block
// nobody states stays unstated (nil) for the runtime to fill.
func TestDefaults(t *testing.T) {
	fabric := &config.FabricConfig{
		Source: config.FabricSourceNodeLabels,
		Levels: []config.FabricLevel{
			{Name: "leaf", NodeLabel: "network.topology.nvidia.com/leaf"},
			{Name: "spine", NodeLabel: "network.topology.nvidia.com/spine"},
			{Name: "block", NodeLabel: "network.topology.nvidia.com/block"},
		},
		GPUResourceName: "nvidia.com/gpu", DefaultLevel: "any", DefaultMode: config.FabricModePreferred,
	}
	tests := []struct {
		name, kind, args string
		want             runtime.Object
	}{
		{"FabricTopology without a fabric states none", "FabricTopologyArgs", "", &config.FabricTopologyArgs{}},
		{"an empty fabric block takes every default", "FabricTopologyArgs", "fabric: {}\n", &config.FabricTopologyArgs{Fabric: fabric}},
		{"levels replace the default levels, the rest defaults", "FabricTopologyArgs", "fabric:\n  levels: [{name: rack, nodeLabel: example.com/rack}]\n",
			&config.FabricTopologyArgs{Fabric: &config.FabricConfig{Source: config.FabricSourceNodeLabels, Levels: []config.FabricLevel{{Name: "rack", NodeLabel: "example.com/rack"}},
				GPUResourceName: "nvidia.com/gpu", DefaultLevel: "any", DefaultMode: config.FabricModePreferred}}},
		{"Gang", "GangArgs", "", &config.GangArgs{DefaultScheduleTimeoutSeconds: 60, RejectedGangBackoffSeconds: 10}},
		{"SlurmNodeState without Slurm states none", "SlurmNodeStateArgs", "", &config.SlurmNodeStateArgs{}},
		{"a Slurm block with an endpoint", "SlurmNodeStateArgs", "slurm: {endpoint: unix:///run/slurmrestd.sock}\n", &config.SlurmNodeStateArgs{Slurm: &config.SlurmConfig{
			Endpoint: "unix:///run/slurmrestd.sock", PollIntervalSeconds: 10, RequestTimeoutSeconds: 5, MaxStalenessSeconds: 60,
			FailureMode: config.SlurmFailClosed, UnhealthyStates: []string{"DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "MAINTENANCE", "BLOCKED", "PLANNED", "INVALID_REG", "REBOOT_REQUESTED", "REBOOT_ISSUED", "POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"},
			SharedNodeLabel: "sluice.dev/slurm-shared", GRESName: "gpu", Drain: &config.SlurmDrainConfig{WritesPerSecond: 5},
			Placeholders: &config.SlurmPlaceholderConfig{TimeoutSeconds: 30, ResyncSeconds: 30},
		}}},
		{"InferencePacking states nothing by default", "InferencePackingArgs", "", &config.InferencePackingArgs{}},
		{"OverflowPreemption blocks", "OverflowPreemptionArgs", "overflow: {}\nclaims: {}\nreturn: {}\n", &config.OverflowPreemptionArgs{
			Overflow: &config.OverflowConfig{ResearchPriorityClasses: []string{"research"}, ProductionPriorityClasses: []string{"production"},
				OverflowNodeSelector: "type=virtual-kubelet", OverflowTaintKey: "virtual-kubelet.io/provider"},
			Claims: &config.ClaimsConfig{WaveTimeoutSeconds: 600, ReplacementTimeoutSeconds: 300, RetryBackoffSeconds: 30, DefaultMaxUnavailable: intstr.FromString("25%"), MakeBeforeBreak: true, WarmTimeoutSeconds: 300},
			Return: &config.ReturnConfig{Enabled: true, HysteresisSeconds: 120, MaxPodsPerWave: 10, MinWaveIntervalSeconds: 30, PollIntervalSeconds: 5,
				WaveTimeoutSeconds: 300},
		}},
		// A claim timeout below 600 s takes a warm timeout below it: half.
		{"a short claim timeout halves the warm timeout", "OverflowPreemptionArgs", "claims: {waveTimeoutSeconds: 180}\n", &config.OverflowPreemptionArgs{
			Claims: &config.ClaimsConfig{WaveTimeoutSeconds: 180, ReplacementTimeoutSeconds: 300, RetryBackoffSeconds: 30, DefaultMaxUnavailable: intstr.FromString("25%"), MakeBeforeBreak: true, WarmTimeoutSeconds: 90},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decode(t, tt.kind, tt.args)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
