// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"strings"
	"testing"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

func TestParseFabricRequest(t *testing.T) {
	fabric := &config.FabricConfig{Levels: []config.FabricLevel{{Name: "leaf"}, {Name: "spine"}, {Name: "block"}}}
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
		{"mode is lower case", map[string]string{FabricModeAnnotation: "Required"}, FabricRequest{}, `metadata.annotations[sluice.dev/fabric-mode]: Unsupported value: "Required"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFabricRequest(tt.annotations, fabric, defaults)
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
