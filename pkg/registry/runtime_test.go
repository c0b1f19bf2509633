// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

func fabricWith(levels ...string) *config.FabricConfig {
	f := defaultFabric()
	f.Levels = nil
	for _, l := range levels {
		f.Levels = append(f.Levels, config.FabricLevel{Name: l, NodeLabel: "example.com/" + l})
	}
	return &f
}

// TestFactsStatedOnce: a fact may be stated by any plugin, the same way as
// often as it likes; two different statements are refused, naming both.
func TestFactsStatedOnce(t *testing.T) {
	research := field.NewPath("profiles").Key("sluice-research").Child("pluginConfig").Key("FabricTopology").Child("args")
	production := field.NewPath("profiles").Key("sluice-production").Child("pluginConfig").Key("InferencePacking").Child("args")
	tests := []struct {
		name        string
		first, then config.Facts
		want        string
	}{
		{"stated once", config.Facts{Fabric: fabricWith("leaf")}, config.Facts{}, ""},
		{"stated twice the same", config.Facts{Fabric: fabricWith("leaf")}, config.Facts{Fabric: fabricWith("leaf")}, ""},
		{"the fabric, differently", config.Facts{Fabric: fabricWith("leaf")}, config.Facts{Fabric: fabricWith("rack")},
			"profiles[sluice-production].pluginConfig[InferencePacking].args.fabric: Invalid value: \"(differs)\": states the fabric differently from profiles[sluice-research].pluginConfig[FabricTopology].args.fabric"},
		{"the classes, differently", config.Facts{Overflow: &config.OverflowConfig{ResearchPriorityClasses: []string{"research"}}},
			config.Facts{Overflow: &config.OverflowConfig{ResearchPriorityClasses: []string{"training"}}}, "states the classes and overflow nodes differently"},
		{"Slurm, differently", config.Facts{Slurm: &config.SlurmConfig{Endpoint: "unix:///a"}}, config.Facts{Slurm: &config.SlurmConfig{Endpoint: "unix:///b"}},
			"states the Slurm connection differently"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := New()
			ctx := context.Background()
			if err := rt.Declare(ctx, nil, research, tt.first); err != nil {
				t.Fatal(err)
			}
			err := rt.Declare(ctx, nil, production, tt.then)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestDefaultFacts: the defaults of facts nobody states are the v1
// defaults, the same a stated empty block gets.
func TestDefaultFacts(t *testing.T) {
	want := config.FabricConfig{
		Source: config.FabricSourceNodeLabels,
		Levels: []config.FabricLevel{
			{Name: "leaf", NodeLabel: "network.topology.nvidia.com/leaf"},
			{Name: "spine", NodeLabel: "network.topology.nvidia.com/spine"},
			{Name: "block", NodeLabel: "network.topology.nvidia.com/block"},
		},
		GPUResourceName: "nvidia.com/gpu", DefaultLevel: "any", DefaultMode: config.FabricModePreferred,
	}
	if diff := cmp.Diff(want, defaultFabric()); diff != "" {
		t.Errorf("fabric (-want,+got):\n%s", diff)
	}
	if got := defaultSlurm(); got.Endpoint != "" || got.MaxStalenessSeconds != 60 || got.FailureMode != config.SlurmFailClosed {
		t.Errorf("Slurm defaults %+v", got)
	}
	if got := defaultClaims(); got.WaveTimeoutSeconds != 600 || got.ReplacementTimeoutSeconds != 300 || got.DefaultMaxUnavailable.String() != "25%" {
		t.Errorf("claims defaults %+v", got)
	}
	if got := defaultReturn(); !got.Enabled || got.HysteresisSeconds != 120 || got.WaveTimeoutSeconds != 300 {
		t.Errorf("return defaults %+v", got)
	}
	if got := defaultOverflow(); got.OverflowNodeSelector != "type=virtual-kubelet" {
		t.Errorf("overflow defaults %+v", got)
	}
}

// TestSealBeforeAnyPlugin: a runtime no plugin declared itself to cannot
// be sealed, and says so.
func TestSealBeforeAnyPlugin(t *testing.T) {
	if err := New().Seal(); err == nil || !strings.Contains(err.Error(), "no plugin declared itself") {
		t.Errorf("Seal() = %v", err)
	}
}
