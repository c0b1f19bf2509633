// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"fmt"
	"sort"

	"sigs.k8s.io/yaml"
)

// MergePluginArgs merges patches into the args of sluice's plugins in a
// KubeSchedulerConfiguration (YAML), in every profile that configures
// them: patches maps a plugin name to fields that replace the ones in its
// args, maps merged key by key. The demo and the simulator use it to run
// the shipped configuration with shorter timers. A plugin no profile
// configures is an error; field names are not checked here, the
// scheduler's strict decoding does that when it loads the result.
func MergePluginArgs(config []byte, patches map[string]map[string]any) ([]byte, error) {
	if len(patches) == 0 {
		return config, nil
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	found := map[string]bool{}
	profiles, _ := cfg["profiles"].([]any)
	for i, p := range profiles {
		prof, _ := p.(map[string]any)
		pcs, _ := prof["pluginConfig"].([]any)
		for j, pc := range pcs {
			pc, _ := pc.(map[string]any)
			name, _ := pc["name"].(string)
			patch, ok := patches[name]
			if !ok {
				continue
			}
			args, _ := pc["args"].(map[string]any)
			if args == nil {
				if pc["args"] != nil {
					return nil, fmt.Errorf("profiles[%d].pluginConfig[%d].args: not a mapping", i, j)
				}
				args = map[string]any{}
			}
			pc["args"] = mergeMaps(args, patch)
			found[name] = true
		}
	}
	var missing []string
	for name := range patches {
		if !found[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("no profile configures plugin(s) %v", missing)
	}
	return yaml.Marshal(cfg)
}

// mergeMaps returns dst with src's fields: nested maps merged, anything
// else replaced. src is deep-copied so profiles do not share values.
func mergeMaps(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			dv, _ := dst[k].(map[string]any)
			if dv == nil {
				dv = map[string]any{}
			}
			dst[k] = mergeMaps(dv, sv)
			continue
		}
		dst[k] = v
	}
	return dst
}
