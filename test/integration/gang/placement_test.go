// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestPlacementScenarios runs each scenario with both gang APIs on a fabric
// of 2 spines x 2 leaves x 4 nodes x 8 GPUs (16 nodes, 128 GPUs).
func TestPlacementScenarios(t *testing.T) {
	type step struct {
		gang gangSpec
		// wantLeaves are the leaves the gang must land in ("" entries are
		// wildcards checked by check instead).
		wantLeaves []string
		// check inspects the placement (pod -> node).
		check func(t *testing.T, bound map[string]string)
		// wantPending: nothing of the gang binds; the message of its pods
		// must contain every string in wantMessage.
		wantPending bool
		wantMessage []string
	}
	tests := []struct {
		name     string
		occupied []string // node suffixes (s<spine>l<leaf>n<node>) filled by other pods
		steps    []step
	}{
		{
			name: "fits one leaf: one leaf",
			steps: []step{{
				gang: gangSpec{name: "g4x8", pods: 4, gpus: 8},
				check: func(t *testing.T, bound map[string]string) {
					if l := leaves(bound); len(l) != 1 {
						t.Errorf("4 x 8 GPUs spans leaves %v, want one leaf", l)
					}
				},
			}},
		},
		{
			name: "fits one node: one node",
			steps: []step{{
				gang: gangSpec{name: "g4x2", pods: 4, gpus: 2},
				check: func(t *testing.T, bound map[string]string) {
					nodes := map[string]bool{}
					for _, n := range bound {
						nodes[n] = true
					}
					if len(nodes) != 1 {
						t.Errorf("4 x 2 GPUs on %d nodes, want 1 (an 8-GPU node holds the gang)", len(nodes))
					}
				},
			}},
		},
		{
			// Leaf s0l0 has 2 free nodes, s1l1 has 3, the others 4.
			name:     "best fit keeps the emptiest leaves whole for a later big gang",
			occupied: []string{"s0l0n0", "s0l0n1", "s1l1n0"},
			steps: []step{
				{gang: gangSpec{name: "small", pods: 2, gpus: 8}, wantLeaves: []string{"s0l0"}},
				{gang: gangSpec{name: "medium", pods: 3, gpus: 8}, wantLeaves: []string{"s1l1"}},
				{gang: gangSpec{name: "big", pods: 4, gpus: 8}, wantLeaves: []string{"s0l1"}},
			},
		},
		{
			name: "larger than any leaf: the fewest leaves under one spine",
			steps: []step{{
				gang: gangSpec{name: "g6x8", pods: 6, gpus: 8},
				check: func(t *testing.T, bound map[string]string) {
					l := leaves(bound)
					if len(l) != 2 || spineOf(l[0]) != spineOf(l[1]) {
						t.Errorf("6 x 8 GPUs spans leaves %v, want 2 leaves under one spine", l)
					}
				},
			}},
		},
		{
			name: "required leaf that no leaf holds: nothing bound, explained in numbers",
			steps: []step{{
				gang: gangSpec{name: "g5x8", pods: 5, gpus: 8, annotations: map[string]string{
					gang.FabricLevelAnnotation: "leaf", gang.FabricModeAnnotation: "required",
				}},
				wantPending: true,
				wantMessage: []string{"needs one leaf with room for 5 pods", "has room for 4"},
			}},
		},
	}
	for _, api := range apis {
		for i, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", apiName(api), tt.name), func(t *testing.T) {
				cp := harness.Shared(t)
				ns := harness.NewNamespace(t, cp.Client)
				prefix := fmt.Sprintf("p%d%s", i, apiName(api)[:1])
				fabricNodes(t, cp, prefix, 2, 2, 4)
				for _, o := range tt.occupied {
					occupy(t, cp, ns, prefix+"-"+o)
				}
				harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
				for _, s := range tt.steps {
					pods := createGang(t, cp, ns, api, s.gang)
					if s.wantPending {
						harness.ExpectNeverBound(t, cp.Client, ns, pods...)
						harness.WaitForPodsUnschedulable(t, cp.Client, ns, pods...)
						harness.WaitForEvent(t, cp.Client, ns, "PodGroup", s.gang.name, s.wantMessage...)
						cond := podGroupCondition(t, cp, ns, api, s.gang.name, "sluice.dev/FabricPlaced")
						for _, want := range s.wantMessage {
							if !strings.Contains(cond, want) {
								t.Errorf("PodGroup condition %q does not contain %q", cond, want)
							}
						}
						continue
					}
					bound := harness.WaitForPodsBound(t, cp.Client, ns, pods...)
					t.Logf("gang %s: %v", s.gang.name, bound)
					if s.wantLeaves != nil {
						if diff := cmp.Diff(s.wantLeaves, leaves(bound)); diff != "" {
							t.Errorf("gang %s leaves (-want,+got):\n%s", s.gang.name, diff)
						}
					}
					if s.check != nil {
						s.check(t, bound)
					}
				}
			})
		}
	}
}

func apiName(api gang.API) string {
	if api == gang.Native {
		return "native"
	}
	return "label"
}
