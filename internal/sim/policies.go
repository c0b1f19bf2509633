// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"fmt"
)

// Policy is one scheduling policy: a scheduler configuration, and which of
// its profiles research and production pods name.
type Policy struct {
	Name string
	// Config is a KubeSchedulerConfiguration (YAML).
	Config []byte
	// Research and Production are the schedulerNames of the two classes.
	Research, Production string
	// TopologyKey, when set, is written into gangs' native PodGroups as
	// their one topology constraint (upstream TopologyPlacement).
	TopologyKey string
}

const defaultConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
`

const mostAllocatedConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: nvidia.com/gpu, weight: 10}
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
`

// Policy names.
const (
	PolicyDefault        = "default"
	PolicyMostAllocated  = "default+MostAllocated"
	PolicyUpstreamTopo   = "upstream-TopologyPlacement"
	PolicySluice         = "sluice"
	defaultSchedulerName = "default-scheduler"
)

// Policies returns the policies sluice is compared with, by name:
//
//	default                     kube-scheduler's defaults (LeastAllocated)
//	default+MostAllocated       the defaults packing GPUs (the usual GPU setup)
//	upstream-TopologyPlacement  MostAllocated, and gangs constrained to one
//	                            leaf with upstream's TopologyPlacement
//	sluice                      sluiceConfig (the shipped configuration)
//
// leafLabel is the node label of leaf switches (for the upstream topology
// policy).
func Policies(names []string, sluiceConfig []byte, leafLabel string) ([]Policy, error) {
	all := map[string]Policy{
		PolicyDefault:       {Name: PolicyDefault, Config: []byte(defaultConfig), Research: defaultSchedulerName, Production: defaultSchedulerName},
		PolicyMostAllocated: {Name: PolicyMostAllocated, Config: []byte(mostAllocatedConfig), Research: defaultSchedulerName, Production: defaultSchedulerName},
		PolicyUpstreamTopo: {Name: PolicyUpstreamTopo, Config: []byte(mostAllocatedConfig), Research: defaultSchedulerName, Production: defaultSchedulerName,
			TopologyKey: leafLabel},
		PolicySluice: {Name: PolicySluice, Config: sluiceConfig, Research: "sluice-research", Production: "sluice-production"},
	}
	var out []Policy
	for _, n := range names {
		p, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown policy %q (known: %s, %s, %s, %s)", n, PolicyDefault, PolicyMostAllocated, PolicyUpstreamTopo, PolicySluice)
		}
		out = append(out, p)
	}
	return out, nil
}
