// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"os"
	"strings"
	"testing"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	sluiceconfig "github.com/sluice-sched/sluice/pkg/apis/config"
)

func decode(t *testing.T, data []byte) (*schedconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	return obj.(*schedconfig.KubeSchedulerConfiguration), nil
}

func TestMergePluginArgsOnShippedConfig(t *testing.T) {
	shipped, err := os.ReadFile("../../manifests/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := MergePluginArgs(shipped, map[string]map[string]any{
		"OverflowPreemption": {"return": map[string]any{"hysteresisSeconds": 7, "maxPodsPerWave": 33}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decode(t, out)
	if err != nil {
		t.Fatalf("merged configuration does not decode: %v", err)
	}
	seen := 0
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			args, ok := pc.Args.(*sluiceconfig.OverflowPreemptionArgs)
			if !ok {
				continue
			}
			seen++
			if args.Return.HysteresisSeconds != 7 || args.Return.MaxPodsPerWave != 33 {
				t.Errorf("profile %s: return = %+v, want hysteresis 7 and 33 pods a wave", p.SchedulerName, args.Return)
			}
			// Fields the patch does not name keep the shipped values.
			if args.Return.MinWaveIntervalSeconds != 30 || !args.Return.Enabled {
				t.Errorf("profile %s: return = %+v, want the shipped 30 s wave interval, enabled", p.SchedulerName, args.Return)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no profile configures OverflowPreemption")
	}
}

func TestMergePluginArgsErrors(t *testing.T) {
	shipped, err := os.ReadFile("../../manifests/scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MergePluginArgs(shipped, map[string]map[string]any{"NoSuchPlugin": {"x": 1}}); err == nil || !strings.Contains(err.Error(), "NoSuchPlugin") {
		t.Errorf("unknown plugin: err = %v, want one naming NoSuchPlugin", err)
	}
	// A misspelt field is left for the scheduler's strict decoding, which
	// names it.
	out, err := MergePluginArgs(shipped, map[string]map[string]any{"OverflowPreemption": {"return": map[string]any{"hysteresisSecs": 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(t, out); err == nil || !strings.Contains(err.Error(), "hysteresisSecs") {
		t.Errorf("misspelt field: decode err = %v, want one naming hysteresisSecs", err)
	}
	if _, err := MergePluginArgs([]byte("profiles: [{pluginConfig: [{name: OverflowPreemption, args: 3}]}]"),
		map[string]map[string]any{"OverflowPreemption": {"x": 1}}); err == nil || !strings.Contains(err.Error(), "profiles[0].pluginConfig[0].args") {
		t.Errorf("args not a mapping: err = %v, want the field path", err)
	}
}
