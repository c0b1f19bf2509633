// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package validation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"strings"
	"testing"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

func fabric() *config.FabricConfig {
	return &config.FabricConfig{
		Source:          config.FabricSourceNodeLabels,
		Levels:          []config.FabricLevel{{Name: "leaf", NodeLabel: "example.com/leaf"}, {Name: "spine", NodeLabel: "example.com/spine"}},
		GPUResourceName: "nvidia.com/gpu", DefaultLevel: "any", DefaultMode: config.FabricModePreferred,
	}
}

func slurm() *config.SlurmConfig {
	return &config.SlurmConfig{Endpoint: "https://slurm:6820", TokenFile: "/token", PollIntervalSeconds: 10, RequestTimeoutSeconds: 5,
		MaxStalenessSeconds: 60, FailureMode: config.SlurmFailClosed, UnhealthyStates: []string{"DRAIN"}, GRESName: "gpu"}
}

func returns() *config.ReturnConfig {
	return &config.ReturnConfig{Enabled: true, HysteresisSeconds: 120, MaxPodsPerWave: 10, PollIntervalSeconds: 5, WaveTimeoutSeconds: 300}
}

// TestValidate: every mistake is an error at its field path; valid args
// are accepted, and an unstated block is never checked.
func TestValidate(t *testing.T) {
	path := ArgsPath("p", "X")
	tests := []struct {
		name string
		err  error
		want string // "" for valid
	}{
		{"valid fabric", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: fabric()}), ""},
		{"no fabric stated", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{}), ""},
		{"unknown source", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.Source = "LLDP" })}),
			`profiles[p].pluginConfig[X].args.fabric.source: Unsupported value: "LLDP"`},
		{"no levels", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.Levels = nil })}),
			"args.fabric.levels: Required value"},
		{"reserved level name", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.Levels[0].Name = "node" })}),
			`args.fabric.levels[0].name: Invalid value: "node": is reserved`},
		{"duplicate label", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.Levels[1].NodeLabel = "example.com/leaf" })}),
			`args.fabric.levels[1].nodeLabel: Duplicate value: "example.com/leaf"`},
		{"SlurmTopology without a file", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.Source = config.FabricSourceSlurmTopology })}),
			"args.fabric.slurmTopologyFile: Required value"},
		{"default level not a level", ValidateFabricTopologyArgs(path, &config.FabricTopologyArgs{Fabric: with(fabric(), func(f *config.FabricConfig) { f.DefaultLevel = "rack" })}),
			`args.fabric.defaultLevel: Unsupported value: "rack"`},
		{"gang timeout zero", ValidateGangArgs(path, &config.GangArgs{}), "args.defaultScheduleTimeoutSeconds: Invalid value: 0"},
		{"valid Slurm", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: slurm()}), ""},
		{"https without a token", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) { c.TokenFile = "" })}),
			"args.slurm.tokenFile: Required value"},
		{"plain http", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) { c.Endpoint = "http://slurm:6820" })}),
			`args.slurm.endpoint: Invalid value: "http://slurm:6820": the token is never sent over plain http`},
		{"ftp endpoint", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) { c.Endpoint = "ftp://x" })}),
			"args.slurm.endpoint: Invalid value"},
		{"staleness below the poll interval", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) { c.MaxStalenessSeconds = 5 })}),
			"args.slurm.maxStalenessSeconds: Invalid value: 5: must not be less than pollIntervalSeconds"},
		{"unknown state", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) { c.UnhealthyStates = []string{"BROKEN"} })}),
			`args.slurm.unhealthyStates[0]: Unsupported value: "BROKEN"`},
		{"drains with a bad slurmd selector", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) {
			c.Drain = &config.SlurmDrainConfig{Enabled: true, SlurmdPodSelector: "app in (", WritesPerSecond: 5}
		})}), "args.slurm.drain.slurmdPodSelector: Invalid value"},
		{"slurmd selector without namespaces", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) {
			c.Drain = &config.SlurmDrainConfig{Enabled: true, SlurmdPodSelector: "app=slurmd", WritesPerSecond: 5}
		})}), "args.slurm.drain.slurmdNamespaces: Required value"},
		{"placeholders without a shared-node label", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) {
			c.SharedNodeLabel = ""
			c.Placeholders = &config.SlurmPlaceholderConfig{Enabled: true, TimeoutSeconds: 30, ResyncSeconds: 30}
		})}), "args.slurm.sharedNodeLabel: Required value: placeholder jobs are for nodes shared with slurmd"},
		{"placeholder timeout too long", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) {
			c.Placeholders = &config.SlurmPlaceholderConfig{TimeoutSeconds: 3600, ResyncSeconds: 30}
		})}), "args.slurm.placeholders.timeoutSeconds: Invalid value: 3600: must be between 1 and 600"},
		{"relative commands", ValidateSlurmNodeStateArgs(path, &config.SlurmNodeStateArgs{Slurm: withSlurm(func(c *config.SlurmConfig) {
			c.Commands = "bin"
		})}), `args.slurm.commands: Invalid value: "bin": must be an absolute path`},
		{"production class also research", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Overflow: &config.OverflowConfig{
			ResearchPriorityClasses: []string{"a"}, ProductionPriorityClasses: []string{"a"}, OverflowNodeSelector: "x=y", OverflowTaintKey: "t"}}),
			`args.overflow.productionPriorityClasses[0]: Invalid value: "a": is also a research class`},
		{"bad overflow selector", ValidateInferencePackingArgs(path, &config.InferencePackingArgs{Overflow: &config.OverflowConfig{
			ResearchPriorityClasses: []string{"r"}, ProductionPriorityClasses: []string{"p"}, OverflowNodeSelector: "x==y==z", OverflowTaintKey: "t"}}),
			"args.overflow.overflowNodeSelector: Invalid value"},
		{"bad research namespaces", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Overflow: &config.OverflowConfig{
			ResearchPriorityClasses: []string{"r"}, ProductionPriorityClasses: []string{"p"}, OverflowNodeSelector: "x=y", OverflowTaintKey: "t",
			ResearchNamespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}}}),
			"args.overflow.researchNamespaces.matchExpressions[0].operator: Invalid value"},
		{"claim timeout zero", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Claims: &config.ClaimsConfig{}}),
			"args.claims.waveTimeoutSeconds: Invalid value: 0"},
		{"return poll zero", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Return: withReturn(func(c *config.ReturnConfig) { c.PollIntervalSeconds = 0 })}),
			"args.return.pollIntervalSeconds: Invalid value: 0"},
		{"return wave timeout zero", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Return: withReturn(func(c *config.ReturnConfig) { c.WaveTimeoutSeconds = 0 })}),
			"args.return.waveTimeoutSeconds: Invalid value: 0"},
		{"default budget zero", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Claims: &config.ClaimsConfig{
			WaveTimeoutSeconds: 600, ReplacementTimeoutSeconds: 300, RetryBackoffSeconds: 30, DefaultMaxUnavailable: intstr.FromString("0%")}}),
			`args.claims.defaultMaxUnavailable: Invalid value: "0%"`},
		{"warm timeout not below the claim timeout", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Claims: &config.ClaimsConfig{
			WaveTimeoutSeconds: 600, ReplacementTimeoutSeconds: 300, RetryBackoffSeconds: 30, DefaultMaxUnavailable: intstr.FromInt32(1), MakeBeforeBreak: true, WarmTimeoutSeconds: 600}}),
			"args.claims.warmTimeoutSeconds: Invalid value: 600: must be below waveTimeoutSeconds (600)"},
		{"valid return", ValidateOverflowPreemptionArgs(path, &config.OverflowPreemptionArgs{Return: returns()}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.want == "" && tt.err != nil:
				t.Errorf("want valid, got %v", tt.err)
			case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
				t.Errorf("error %v, want it to contain %q", tt.err, tt.want)
			}
		})
	}
}

func with(f *config.FabricConfig, change func(*config.FabricConfig)) *config.FabricConfig {
	change(f)
	return f
}

func withSlurm(change func(*config.SlurmConfig)) *config.SlurmConfig {
	c := slurm()
	change(c)
	return c
}

func withReturn(change func(*config.ReturnConfig)) *config.ReturnConfig {
	c := returns()
	change(c)
	return c
}
