// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"strings"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

func TestParseFabricRequest(t *testing.T) {
	fabric := &config.FabricConfig{Levels: []config.FabricLevel{{Name: "leaf", NodeLabel: "example.com/leaf"}, {Name: "spine", NodeLabel: "example.com/spine"}, {Name: "block"}},
		DefaultLevel: "any", DefaultMode: config.FabricModePreferred}
	defaults := FabricRequest{Level: "any", Mode: config.FabricModePreferred}
	tests := []struct {
		name        string
		annotations map[string]string
		want        FabricRequest
		err         string
	}{
		{"no annotations: defaults", nil, defaults, ""},
		{"leaf required", map[string]string{FabricLevelAnnotation: "leaf", FabricModeAnnotation: "required"}, FabricRequest{Level: "leaf", Mode: config.FabricModeRequired}, ""},
		{"level only keeps the default mode", map[string]string{FabricLevelAnnotation: "spine"}, FabricRequest{Level: "spine", Mode: config.FabricModePreferred}, ""},
		{"any", map[string]string{FabricLevelAnnotation: "any"}, defaults, ""},
		{"unknown level", map[string]string{FabricLevelAnnotation: "rack"}, FabricRequest{}, `metadata.annotations[sluice.dev/fabric-level]`},
		// Values in any case, as the args write them (Required) or not.
		{"mode in any case", map[string]string{FabricLevelAnnotation: "Leaf", FabricModeAnnotation: "Required"}, FabricRequest{Level: "leaf", Mode: config.FabricModeRequired}, ""},
		{"upper case", map[string]string{FabricLevelAnnotation: "SPINE", FabricModeAnnotation: "PREFERRED"}, FabricRequest{Level: "spine", Mode: config.FabricModePreferred}, ""},
		{"Any", map[string]string{FabricLevelAnnotation: "Any"}, defaults, ""},
		{"unknown mode", map[string]string{FabricModeAnnotation: "strict"}, FabricRequest{}, `metadata.annotations[sluice.dev/fabric-mode]: Unsupported value: "strict"`},
		// Kueue TAS: a node label key, the level it labels.
		{"kueue required", map[string]string{KueueRequiredTopologyAnnotation: "example.com/spine"}, FabricRequest{Level: "spine", Mode: config.FabricModeRequired}, ""},
		{"kueue preferred", map[string]string{KueuePreferredTopologyAnnotation: "example.com/leaf"}, FabricRequest{Level: "leaf", Mode: config.FabricModePreferred}, ""},
		{"kueue key of no level", map[string]string{KueueRequiredTopologyAnnotation: "kubernetes.io/hostname"},
			FabricRequest{}, `metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Unsupported value: "kubernetes.io/hostname": supported values: "example.com/leaf", "example.com/spine"`},
		{"sluice's annotations win over Kueue's", map[string]string{KueueRequiredTopologyAnnotation: "example.com/spine", FabricLevelAnnotation: "leaf"},
			FabricRequest{Level: "leaf", Mode: config.FabricModePreferred}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFabricRequest(tt.annotations, fabric)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestNativeFabricRequest: a native PodGroup's topology constraint
// requires the level its key labels, over any annotation; a key that is no
// level is an error naming the field; without a constraint the
// annotations apply.
func TestNativeFabricRequest(t *testing.T) {
	fabric := &config.FabricConfig{Levels: []config.FabricLevel{{Name: "leaf", NodeLabel: "example.com/leaf"}, {Name: "spine", NodeLabel: "example.com/spine"}},
		DefaultLevel: "any", DefaultMode: config.FabricModePreferred}
	pg := func(key string, annotations map[string]string) *schedulingv1beta1.PodGroup {
		p := &schedulingv1beta1.PodGroup{}
		p.Annotations = annotations
		if key != "" {
			p.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}}}
		}
		return p
	}
	tests := []struct {
		name string
		pg   *schedulingv1beta1.PodGroup
		want FabricRequest
		err  string
	}{
		{"constraint on the spine label", pg("example.com/spine", nil), FabricRequest{Level: "spine", Mode: config.FabricModeRequired}, ""},
		{"constraint over annotations", pg("example.com/leaf", map[string]string{FabricLevelAnnotation: "spine", FabricModeAnnotation: "preferred"}),
			FabricRequest{Level: "leaf", Mode: config.FabricModeRequired}, ""},
		{"annotations without a constraint", pg("", map[string]string{FabricLevelAnnotation: "spine"}), FabricRequest{Level: "spine", Mode: config.FabricModePreferred}, ""},
		{"defaults", pg("", nil), FabricRequest{Level: "any", Mode: config.FabricModePreferred}, ""},
		{"a key that is no level", pg("topology.kubernetes.io/rack", nil), FabricRequest{},
			`spec.schedulingConstraints.topology[0].key: Unsupported value: "topology.kubernetes.io/rack": supported values: "example.com/leaf", "example.com/spine"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NativeFabricRequest(tt.pg, tt.pg.Annotations, fabric)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
