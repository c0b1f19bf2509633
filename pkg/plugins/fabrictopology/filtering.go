// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
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
	pg, err := pl.podGroups.Get(key.Namespace, key.Name)
	if err != nil {
		// The Gang plugin holds members back until their PodGroup exists.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s/%s: %v", key.Namespace, key.Name, err))
	}
	req, err := gang.ParseFabricRequest(pg.Annotations, &pl.args.Fabric, pl.defaults)
	if err != nil {
		msg := fmt.Sprintf("PodGroup %s/%s: %v", pg.Namespace, pg.Name, err)
		pl.reporter.Event(pg, []*v1.Pod{pod}, v1.EventTypeWarning, ReasonInvalidRequest, "Scheduling", msg)
		pl.reporter.SetCondition(key, metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: ReasonInvalidRequest, Message: msg})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	members, err := pl.members.List(key.Namespace, key.Name)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	plan := gangPlan{key: key, request: req, template: capacity.Largest(members, pl.gpu), pinned: pl.placedMembers(key, members)}
	if plan.template == nil {
		plan.template = pod
	}
	plan.pods = max(len(members)-len(plan.pinned), 1)
	plan.minPods = max(int(pg.Spec.MinMember), 1) - len(plan.pinned)
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	// Only the best candidate is used: the lowest level is enough.
	d := pl.decide(tree, nodes, plan, true)
	pl.progress.attempt(key, d, len(members))
	if len(d.candidates) == 0 {
		klog.FromContext(ctx).V(4).Info("No fabric domain holds the gang", "pod", klog.KObj(pod), "gang", key, "why", d.explanation)
		pl.reporter.Event(pg, nil, v1.EventTypeWarning, ReasonNoDomain, "Scheduling", d.explanation)
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
	for _, ni := range nodesOf(tree, best, indexNodes(tree, nodes)) {
		allowed.Insert(ni.Node().Name)
	}
	klog.FromContext(ctx).V(5).Info("Fabric plan for gang member", "pod", klog.KObj(pod), "gang", key, "domain", best.Domain.Name, "nodes", allowed.Len())
	return &fwk.PreFilterResult{NodeNames: allowed}, nil
}

// placedMembers returns the nodes of the gang's members that are bound or
// waiting at Permit (assumed on a node).
func (pl *FabricTopology) placedMembers(key gang.Key, members []*v1.Pod) []string {
	var nodes []string
	for _, m := range members {
		if m.Spec.NodeName != "" {
			nodes = append(nodes, m.Spec.NodeName)
		}
	}
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		if p.Namespace == key.Namespace && p.Labels[v1alpha1.PodGroupLabel] == key.Name && p.Spec.NodeName != "" {
			nodes = append(nodes, p.Spec.NodeName)
		}
	})
	return nodes
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
