// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// placementRanksKey holds, in the PodGroup cycle state, the rank of every
// placement GeneratePlacements offered (0 = best).
const placementRanksKey fwk.StateKey = "GeneratePlacements" + Name

type placementRanks map[*fwk.Placement]int

// Clone returns the ranks: they are written once and only read afterwards.
func (r placementRanks) Clone() fwk.StateData { return r }

// GeneratePlacements offers the best-fit domains of the lowest fabric level
// that holds the whole gang (and the best domain of each higher level as a
// fallback), each as a placement made of the nodes of the sub-domains the
// gang would use. The framework simulates the gang in each and
// ScorePlacement ranks the ones where it fits. The first attempt
// offers only the lowest level's candidates.
//
// A PodGroup that is not a gang, or has no pods to place, gets the parent
// placement back unchanged.
func (pl *FabricTopology) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pgi fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	pg := pgi.GetPodGroup()
	pods := pgi.GetUnscheduledPods()
	unchanged := &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}
	if pg == nil || pg.Spec.SchedulingPolicy.Gang == nil || len(pods) == 0 {
		return unchanged, nil
	}
	logger := klog.FromContext(ctx)
	key := gang.Key{API: gang.Native, Namespace: pg.Namespace, Name: pg.Name}
	g, status := pl.gangOf(key, pg, pods)
	if status != nil {
		return nil, status
	}
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	members, err := pl.gangs.MembersOf(key, gang.HandleScheduler(pl.handle))
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	plan := gangPlan{key: key, request: g.Request, pods: len(pods), template: capacity.Largest(pods, pl.gpu), pinned: members.PlacedNodes()}
	plan.minPods = g.MinMember - len(plan.pinned)
	// Each placement costs a simulated scheduling of the gang, and the
	// higher levels' fallbacks cost the most (a spine, the cluster). The
	// capacity model is conservative, so the lowest level's candidates
	// nearly always fit: a gang's first attempt offers (and searches) only
	// them; a gang that fails there (a constraint the model does not see)
	// gets the whole ladder on its next attempt.
	d := pl.decide(tree, parent.Nodes, plan, pl.progress.attempts(key) == 0)
	pl.progress.attempt(key, d, len(pods)+len(plan.pinned))
	if len(d.candidates) == 0 {
		logger.V(4).Info("No fabric domain holds the gang", "podGroup", klog.KObj(pg), "why", d.explanation)
		pl.reporter.Event(pg, nil, v1.EventTypeWarning, ReasonNoDomain, "Scheduling", d.explanation)
		pl.reporter.SetCondition(key, metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: ReasonNoDomain, Message: d.explanation})
		if d.fallback == nil {
			return unchanged, nil
		}
		// Offer the roomiest allowed domain rather than no placement: the
		// framework then simulates the gang there and fails it pod by pod,
		// so every PodGroupPostFilter (overflow preemption, and DRA's,
		// which needs the pods' cycle state) sees a normal failure. Our
		// capacity model is conservative, so if the gang does fit there
		// after all, it is placed.
		d.candidates = []fabric.Placement{{Domain: d.fallback}}
	}
	ranks := placementRanks{}
	result := &fwk.GeneratePlacementsResult{}
	for rank, c := range d.candidates {
		p := &fwk.Placement{Name: c.Domain.Name, Nodes: nodesOf(tree, c, d.infos)}
		ranks[p] = rank
		result.Placements = append(result.Placements, p)
	}
	state.Write(placementRanksKey, ranks)
	logger.V(4).Info("Fabric placements for gang", "podGroup", klog.KObj(pg), "pods", d.pods, "best", d.candidates[0].Domain.Name, "placements", len(result.Placements))
	return result, nil
}

// ScorePlacement ranks a feasible placement by the order GeneratePlacements
// offered it: lower fabric level first, then best fit. The best gets
// MaxNodeScore, each next one 10 less, so ties never happen (the framework
// would break them at random).
func (pl *FabricTopology) ScorePlacement(_ context.Context, state fwk.PlacementCycleState, _ fwk.PodGroupInfo, placement *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	data, err := state.GetPodGroupSchedulingCycle().Read(placementRanksKey)
	if err != nil {
		return 0, nil
	}
	rank, ok := data.(placementRanks)[placement.Placement]
	if !ok {
		return 0, nil
	}
	return max(fwk.MaxScore-int64(rank)*10, 0), nil
}

// PlacementScoreExtensions returns nil: scores are already in [0, 100].
func (pl *FabricTopology) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return nil }
