// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// preFilterStateKey holds a label-gang member's plan between PreFilter and
// Score.
const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// preFilterState is the planned number of the gang's pods per node.
type preFilterState struct {
	planned map[string]int
}

// Clone returns the state: it is never changed after PreFilter.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter plans a label gang member: where should the members not yet
// placed go, given where the others are? Members restrict themselves to the
// chosen sub-domains; the plan is recomputed from the cluster at every
// member, with placed members pinned, so it needs no memory of its own and
// adapts when capacity changes between members. Native gang members and
// other pods are skipped (native gangs are placed by GeneratePlacements).
func (pl *FabricTopology) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, ok := gang.KeyOf(pod)
	if !ok || key.API != gang.Label {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	g, status := pl.gangOf(key, nil, []*v1.Pod{pod})
	if status != nil {
		return nil, status
	}
	members, err := pl.gangs.MembersOf(key, gang.HandleScheduler(pl.handle))
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	all := members.All()
	plan := gangPlan{key: key, request: g.Request, template: capacity.Largest(all, pl.gpu), pinned: members.PlacedNodes()}
	if plan.template == nil {
		plan.template = pod
	}
	plan.pods = max(len(all)-len(plan.pinned), 1)
	plan.minPods = g.MinMember - len(plan.pinned)
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	// Only the best candidate is used: the lowest level is enough.
	d := pl.decide(tree, nodes, plan, true)
	pl.progress.attempt(key, d, len(all))
	if len(d.candidates) == 0 {
		klog.FromContext(ctx).V(4).Info("No fabric domain holds the gang", "pod", klog.KObj(pod), "gang", key, "why", d.explanation)
		pl.reporter.Event(g.PodGroup, nil, v1.EventTypeWarning, ReasonNoDomain, "Scheduling", d.explanation)
		pl.reporter.SetCondition(key, metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: ReasonNoDomain, Message: d.explanation})
		return nil, fwk.NewStatus(fwk.Unschedulable, d.explanation)
	}
	best := d.candidates[0]
	planned := make(map[string]int, len(best.Nodes))
	for i, n := range best.Nodes {
		planned[tree.Node(i).Name] = n
	}
	state.Write(preFilterStateKey, &preFilterState{planned: planned})
	allowed := sets.New[string]()
	for _, ni := range nodesOf(tree, best, d.infos) {
		allowed.Insert(ni.Node().Name)
	}
	klog.FromContext(ctx).V(5).Info("Fabric plan for gang member", "pod", klog.KObj(pod), "gang", key, "domain", best.Domain.Name, "nodes", allowed.Len())
	return &fwk.PreFilterResult{NodeNames: allowed}, nil
}

// PreFilterExtensions returns nil: the plan does not change with other pods
// added or removed during preemption dry-runs.
func (pl *FabricTopology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Score prefers the nodes the plan gives the gang's pods, so members pack
// onto the fewest, fullest nodes of the domain:
//
//	planned node: 100, any other node of the domain: 0.
func (pl *FabricTopology) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(preFilterStateKey)
	if err != nil {
		return 0, nil
	}
	if data.(*preFilterState).planned[nodeInfo.Node().Name] > 0 {
		return fwk.MaxScore, nil
	}
	return 0, nil
}

// ScoreExtensions returns nil: scores are already in [0, 100].
func (pl *FabricTopology) ScoreExtensions() fwk.ScoreExtensions { return nil }

// PreScore skips scoring for pods without a plan (everything but label
// gang members).
func (pl *FabricTopology) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if _, err := state.Read(preFilterStateKey); err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}
