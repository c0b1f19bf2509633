// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/test/harness"
)

// TestInvalidConfigIsRefused starts the scheduler through kube-scheduler's
// own start-up path (config file, strict decoding, defaulting, plugin
// construction) on the shipped configuration with one mistake each, and
// expects start-up to fail with the mistake's field path in the message.
// Each case edits the real YAML text, so the test breaks if the shipped file
// stops containing what it edits.
func TestInvalidConfigIsRefused(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), harness.ShippedConfig))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		replace [2]string // old -> new in the shipped YAML
		want    []string  // substrings of the start-up error
	}{
		{
			name:    "unknown field in FabricTopology args",
			replace: [2]string{"      fabric:\n", "      fabrik:\n"},
			want:    []string{`unknown field "fabrik"`, "FabricTopology"},
		},
		{
			name:    "unknown field nested in the fabric",
			replace: [2]string{"        gpuResourceName: nvidia.com/gpu\n", "        gpuResource: nvidia.com/gpu\n"},
			want:    []string{`unknown field "fabric.gpuResource"`},
		},
		{
			name:    "invalid fabric mode",
			replace: [2]string{"        defaultMode: Preferred\n", "        defaultMode: Sometimes\n"},
			want:    []string{"profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.defaultMode", `Unsupported value: "Sometimes"`},
		},
		{
			name:    "invalid fabric label key",
			replace: [2]string{"          nodeLabel: network.topology.nvidia.com/spine\n", "          nodeLabel: bad label!\n"},
			want:    []string{"profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.levels[1].nodeLabel", "bad label!"},
		},
		{
			name:    "default level that is not a level",
			replace: [2]string{"        defaultLevel: any\n", "        defaultLevel: rack\n"},
			want:    []string{"profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.defaultLevel", `"rack"`},
		},
		{
			// One fact, two statements that differ: both places named.
			name: "the fabric stated twice, differently",
			replace: [2]string{"  pluginConfig:\n  - name: NodeResourcesFit\n", "  pluginConfig:\n  - name: InferencePacking\n    args:\n" +
				"      fabric:\n        levels:\n        - {name: rack, nodeLabel: example.com/rack}\n  - name: NodeResourcesFit\n"},
			want: []string{"profiles[sluice-production].pluginConfig[InferencePacking].args.fabric", "states the fabric differently from profiles[sluice-research].pluginConfig[FabricTopology].args.fabric"},
		},
		{
			name: "the Slurm endpoint stated twice, differently",
			replace: [2]string{"  pluginConfig:\n  - name: NodeResourcesFit\n", "  pluginConfig:\n  - name: SlurmNodeState\n    args:\n" +
				"      slurm:\n        endpoint: unix:///run/other-slurmrestd.sock\n  - name: NodeResourcesFit\n"},
			want: []string{"profiles[sluice-production].pluginConfig[SlurmNodeState].args.slurm", "states the Slurm connection differently from profiles[sluice-research].pluginConfig[SlurmNodeState].args.slurm"},
		},
		{
			name:    "gang timeout zero",
			replace: [2]string{"      defaultScheduleTimeoutSeconds: 60\n", "      defaultScheduleTimeoutSeconds: 0\n"},
			want:    []string{"profiles[sluice-research].pluginConfig[Gang].args.defaultScheduleTimeoutSeconds", "must be greater than 0"},
		},
		{
			name:    "unknown top-level field",
			replace: [2]string{"kind: KubeSchedulerConfiguration\n", "kind: KubeSchedulerConfiguration\nprofilez: []\n"},
			want:    []string{`unknown field "profilez"`},
		},
	}
	cp := harness.Shared(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := string(shipped)
			if !strings.Contains(text, tt.replace[0]) {
				t.Fatalf("the shipped config no longer contains %q; update the test", tt.replace[0])
			}
			text = strings.Replace(text, tt.replace[0], tt.replace[1], 1)
			file := writeConfig(t, cp, text)
			s, err := harness.RunSchedulerFromFile(t.Context(), file)
			if err == nil {
				s.Stop()
				t.Fatal("the scheduler started with an invalid configuration")
			}
			t.Logf("start-up error: %v", err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("start-up error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// writeConfig points a configuration text at the test control plane with
// leader election off, leaving everything else as written.
func writeConfig(t *testing.T, cp *harness.ControlPlane, text string) string {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	doc["clientConnection"] = map[string]any{"kubeconfig": cp.Kubeconfig}
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
