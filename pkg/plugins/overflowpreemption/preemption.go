// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// plan is a claim decided but not started.
type plan struct {
	claim overflow.Claim
	tree  *fabric.Tree
}

// planFor plans a claim for pods (the claimants still to place), given the
// nodes where members already run and the gang's fabric request.
func (pl *OverflowPreemption) planFor(pods []*v1.Pod, pinned []string, req gang.FabricRequest) (*plan, string) {
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, err.Error()
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err.Error()
	}
	template := capacity.Largest(pods, pl.gpu)
	shape := capacity.ShapeOf(template)
	ext := pl.external
	var states []overflow.NodeState
	for _, ni := range all {
		node := ni.Node()
		if node == nil || pl.classes.IsOverflowNode(node) {
			continue
		}
		usable, held := true, map[v1.ResourceName]int64(nil)
		if ext != nil {
			usable, held = ext.NodeExternal(node)
		}
		st := overflow.NodeState{
			Name: node.Name,
			Free: capacity.FreeOf(ni, held),
			// A node being freed for another claim is not planned twice.
			Eligible: usable && shape.Eligible(node) && !pl.claims.NodeClaimed(node.Name),
		}
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); pl.classes.Eligible(p) {
				st.Victims = append(st.Victims, p)
			}
		}
		overflow.VictimOrder(st.Victims, pl.gpu)
		states = append(states, st)
	}
	maxLevel := tree.RootLevel()
	if req.Mode == config.FabricModeRequired {
		if i, ok := tree.LevelIndex(req.Level); ok {
			maxLevel = i
		}
	}
	var pinnedIdx []int
	for _, n := range pinned {
		if i, ok := tree.NodeIndex(n); ok {
			pinnedIdx = append(pinnedIdx, i)
		}
	}
	c, why, ok := overflow.PlanClaim(tree, states, overflow.Request{Shape: shape, Pods: len(pods), MaxLevel: maxLevel, Pinned: pinnedIdx}, overflow.RoomOf(pl.classes, all))
	if !ok {
		return nil, why
	}
	return &plan{claim: c, tree: tree}, ""
}

// assign maps claimants to the plan's nodes, in name order, so the same
// plan always nominates the same way.
func (p *plan) assign(pods []*v1.Pod) map[string]string {
	var slots []string
	names := make([]string, 0, len(p.claim.Nodes))
	for n := range p.claim.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for i := 0; i < p.claim.Nodes[n]; i++ {
			slots = append(slots, n)
		}
	}
	sorted := append([]*v1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	out := map[string]string{}
	for i, pod := range sorted {
		if i < len(slots) {
			out[pod.Namespace+"/"+pod.Name] = slots[i]
		}
	}
	return out
}

// start turns a plan into a running claim and tells the claimants and the
// victims why.
func (pl *OverflowPreemption) start(ctx context.Context, key string, claimants []*v1.Pod, p *plan, nominations map[string]string) *claims.Claim {
	var victims []*v1.Pod
	nodes := make([]string, 0, len(p.claim.Victims))
	for n := range p.claim.Victims {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		victims = append(victims, p.claim.Victims[n]...)
	}
	c := &claims.Claim{
		Key: key, Domain: p.claim.Domain.Name, Claimants: claimants, Nominations: nominations, Victims: victims,
		Note: fmt.Sprintf("%d production pods chosen as the fewest victims in %s", len(victims), p.claim.Domain.Name),
	}
	pl.claims.Start(c)
	msg := fmt.Sprintf("claiming %s: %s move to overflow nodes in PodDisruptionBudget-safe waves", p.claim.Domain.Name, describe(victims))
	if rec := pl.handle.EventRecorder(); rec != nil {
		for _, cl := range claimants {
			rec.Eventf(cl, nil, v1.EventTypeNormal, ReasonClaiming, "Preempting", "%s", msg)
		}
	}
	klog.FromContext(ctx).V(2).Info("Research claim started", "claim", key, "domain", p.claim.Domain.Name, "victims", len(victims), "claimants", len(claimants))
	return c
}

func describe(victims []*v1.Pod) string {
	names := make([]string, 0, len(victims))
	for _, v := range victims {
		names = append(names, v.Namespace+"/"+v.Name)
	}
	if len(names) > 6 {
		names = append(names[:6], fmt.Sprintf("and %d more", len(names)-6))
	}
	return fmt.Sprintf("%d production pods (%s)", len(victims), strings.Join(names, ", "))
}

// PostFilter claims room for a single research pod (e.g. a slurmd worker)
// or, for a member of a label gang, for the whole gang's remaining members.
func (pl *OverflowPreemption) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if err := pl.ready(ctx); err != nil {
		return nil, fwk.AsStatus(err)
	}
	if !pl.classes.IsResearch(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNotResearch+": only research pods claim room from production")
	}
	key := pod.Namespace + "/" + pod.Name
	claimants := []*v1.Pod{pod}
	var pinned []string
	_, fabricCfg := pl.rt.Fabric()
	req := gang.FabricRequest{Level: fabricCfg.DefaultLevel, Mode: fabricCfg.DefaultMode}
	if g, ok := gang.KeyOf(pod); ok && g.API == gang.Label {
		key = g.String()
		lg, err := pl.gangs.Get(g)
		if err != nil {
			// The gang's own plugins tell the user why (Events on the
			// PodGroup and its pods); nothing is claimed for it.
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoClaim+": "+err.Error())
		}
		req = lg.Request
		members, err := pl.gangs.MembersOf(g, gang.HandleScheduler(pl.handle))
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		pinned, claimants = members.PlacedNodes(), members.Pending
	} else if ok {
		// Native gang members are handled as a group (PodGroupPostFilter).
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if c := pl.claims.Get(key); c != nil {
		return nominate(pod, c)
	}
	p, why := pl.planFor(claimants, pinned, req)
	if p == nil {
		pl.noClaim(claimants, why)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": "+why)
	}
	nominations := p.assign(claimants)
	c := pl.start(ctx, key, claimants, p, nominations)
	logger := klog.FromContext(ctx)
	for _, m := range claimants {
		if m.UID == pod.UID {
			continue
		}
		if node, ok := nominations[m.Namespace+"/"+m.Name]; ok {
			if pi, err := framework.NewPodInfo(m); err == nil {
				pl.handle.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride})
			}
		}
	}
	return nominate(pod, c)
}

func nominate(pod *v1.Pod, c *claims.Claim) (*fwk.PostFilterResult, *fwk.Status) {
	node, ok := c.Nomination(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("claim %s does not cover this pod", c.Key))
	}
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}}, fwk.NewStatus(fwk.Success)
}

// PodGroupPostFilter claims one fabric domain for a native gang. Before
// anything is evicted, the plan is checked by the scheduler itself: the
// victims are removed from a copy of the snapshot and the whole gang is
// scheduled there, so only a claim that really makes the gang fit evicts.
func (pl *OverflowPreemption) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pgi fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if err := pl.ready(ctx); err != nil {
		return nil, fwk.AsStatus(err)
	}
	pg := pgi.GetPodGroup()
	pods := pgi.GetUnscheduledPods()
	if pg == nil || len(pods) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if !pl.classes.IsResearch(pods[0]) {
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNotResearch+": only research gangs claim room from production")
	}
	gkey := gang.Key{API: gang.Native, Namespace: pg.Namespace, Name: pg.Name}
	key := gkey.String()
	if c := pl.claims.Get(key); c != nil {
		return groupNominations(pods, c), fwk.NewStatus(fwk.Success)
	}
	g, err := pl.gangs.NativeGang(pg)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoClaim+": "+err.Error())
	}
	req := g.Request
	members, err := pl.gangs.MembersOf(gkey, gang.HandleScheduler(pl.handle))
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	pinned := members.PlacedNodes()
	p, why := pl.planFor(pods, pinned, req)
	if p == nil {
		pl.noClaim(pods, why)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": "+why)
	}
	nominations, st := pl.verify(ctx, p, schedule)
	if !st.IsSuccess() {
		pl.noClaim(pods, st.Message())
		return nil, st
	}
	c := pl.start(ctx, key, pods, p, nominations)
	return groupNominations(pods, c), fwk.NewStatus(fwk.Success)
}

// verify removes the plan's victims from a copy of the snapshot, runs the
// gang's scheduling there, and returns where its pods would go.
func (pl *OverflowPreemption) verify(ctx context.Context, p *plan, schedule fwk.PodGroupSchedulingFunc) (map[string]string, *fwk.Status) {
	logger := klog.FromContext(ctx)
	snap := pl.handle.MutableSnapshotSharedLister()
	if err := snap.StartMutations(); err != nil {
		return nil, fwk.AsStatus(err)
	}
	defer func() {
		if err := snap.EndMutations(); err != nil {
			logger.Error(err, "Restoring the scheduling snapshot")
		}
	}()
	for node, victims := range p.claim.Victims {
		for _, v := range victims {
			if err := snap.RemovePod(logger, v, node); err != nil {
				return nil, fwk.AsStatus(err)
			}
		}
	}
	res, st := schedule(ctx)
	if !st.IsSuccess() {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: freeing %s would not be enough: %s", ReasonNoClaim, p.claim.Domain.Name, st.Message()))
	}
	out := map[string]string{}
	for _, a := range res.ProposedAssignments {
		out[a.GetPod().Namespace+"/"+a.GetPod().Name] = a.GetNodeName()
	}
	return out, nil
}

func groupNominations(pods []*v1.Pod, c *claims.Claim) *fwk.PodGroupPostFilterResult {
	res := &fwk.PodGroupPostFilterResult{NominatingInfos: map[types.NamespacedName]*fwk.NominatingInfo{}}
	for _, p := range pods {
		if node, ok := c.Nomination(p); ok {
			res.NominatingInfos[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
		}
	}
	return res
}

// noClaim tells the pods why no production is moved for them. (A gang's
// FailedScheduling event carries the group's failure, not this.)
func (pl *OverflowPreemption) noClaim(pods []*v1.Pod, why string) {
	pl.waiting.Add(pods...)
	rec := pl.handle.EventRecorder()
	if rec == nil {
		return
	}
	for _, p := range pods {
		rec.Eventf(p, nil, v1.EventTypeWarning, ReasonNoClaim, "Preempting", "%s", why)
	}
}
