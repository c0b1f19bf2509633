// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	podgroupv1alpha1 "github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/claims/plan"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
)

// planFor plans a claim for pods (the claimants still to place), given the
// nodes where members already run and the gang's fabric request, over
// the scheduling snapshot (plan.Planner).
func (pl *OverflowPreemption) planFor(pods []*v1.Pod, pinned []string, req gang.FabricRequest) (*plan.Plan, string, []overflow.Blocked) {
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, err.Error(), nil
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err.Error(), nil
	}
	return pl.planner.Plan(tree, all, plan.Request{Claimants: pods, Pinned: pinned, Fabric: req})
}

// maxStayEvents bounds the Events one claim attempt writes on production
// pods that stay.
const maxStayEvents = 50

// stays tells production pods that cannot move why they stay while a
// research claim (claimant, of namespace) needs their room; the claimant
// is named only to its own namespace.
func (pl *OverflowPreemption) stays(pods []overflow.Blocked, namespace, claimant string) {
	rec := pl.handle.EventRecorder()
	if rec == nil {
		return
	}
	for i, b := range pods {
		if i == maxStayEvents {
			break
		}
		research := "research"
		if b.Pod.Namespace == namespace {
			research += " " + claimant
		}
		rec.Eventf(b.Pod, nil, v1.EventTypeWarning, ReasonStays, "Preempting", "not moved to an overflow node for %s: %s", research, b.Why)
	}
}

// passedOver says how many production pods could not move, for the
// research pods' Event (in namespace viewer), naming a few of the
// viewer's own.
func passedOver(viewer string, pods []overflow.Blocked) string {
	if len(pods) == 0 {
		return ""
	}
	blocked := make([]*v1.Pod, len(pods))
	for i, b := range pods {
		blocked[i] = b.Pod
	}
	why := ""
	if pods[0].Pod.Namespace == viewer {
		why = ": " + pods[0].Why
	}
	return fmt.Sprintf("; %d production pods no overflow provider can run were passed over (%s%s)", len(pods), names(viewer, blocked, 3), why)
}

// start records a plan as a ResearchClaim in the apiserver (the claim
// engine carries it out) and tells the claimants why. owner is the
// research pod, or the gang's PodGroup: the claim goes with it.
func (pl *OverflowPreemption) start(ctx context.Context, key string, owner metav1.OwnerReference, claimants []*v1.Pod, p *plan.Plan, nominations map[string]string, attempts int32) (*v1alpha1.ResearchClaim, error) {
	created, err := pl.store.CreateClaim(ctx, pl.planner.Claim(key, owner, claimants, p, nominations, attempts))
	if err != nil {
		return nil, err
	}
	victims := p.Victims()
	ns := created.Namespace
	msg := fmt.Sprintf("claiming %s: %s move to overflow nodes, each budget paced on its own (claim %s)%s", p.Claim.Domain.Name, describe(ns, victims), created.Name, passedOver(ns, p.Unportable))
	pl.stays(p.Stays(p.Unportable), ns, key)
	if rec := pl.handle.EventRecorder(); rec != nil {
		for _, cl := range claimants {
			rec.Eventf(cl, nil, v1.EventTypeNormal, ReasonClaiming, "Preempting", "%s", msg)
		}
	}
	klog.FromContext(ctx).V(2).Info("Research claim started", "claim", key, "domain", p.Claim.Domain.Name, "victims", len(victims), "claimants", len(claimants))
	return created, nil
}

// describe counts production pods for namespace viewer, naming the
// first few of its own; those of other namespaces are only counted.
func describe(viewer string, pods []*v1.Pod) string {
	return fmt.Sprintf("%d production pods (%s)", len(pods), names(viewer, pods, 6))
}

// names lists the first n of viewer's own pods by name, counts the rest of
// its own, and counts those of other namespaces (never named to it).
func names(viewer string, pods []*v1.Pod, n int) string {
	var out []string
	own := 0
	for _, p := range pods {
		if p.Namespace != viewer {
			continue
		}
		if own++; own <= n {
			out = append(out, p.Name)
		}
	}
	if own > n {
		out = append(out, fmt.Sprintf("%d more", own-n))
	}
	if other := len(pods) - own; other > 0 {
		out = append(out, fmt.Sprintf("%d of other namespaces", other))
	}
	return strings.Join(out, ", ")
}

// existing looks up the claimant key's claim: a live one is used as it is
// (its nominations); one given up blocks new plans until its backoff ends,
// then it is deleted so a new plan can take its place. It returns the
// claim to use, or a status to return, or neither (plan anew), and the
// number of earlier claims given up.
func (pl *OverflowPreemption) existing(ctx context.Context, namespace, key string) (*v1alpha1.ResearchClaim, *fwk.Status, int32) {
	c, ok := pl.store.Get(namespace, claims.NameOf(key))
	if !ok {
		return nil, nil, 0
	}
	if claims.Live(c) {
		return c, nil, 0
	}
	if c.Status.RetryAfter != nil && time.Now().Before(c.Status.RetryAfter.Time) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the last claim was given up (%s); no new claim before %s",
			ReasonNoClaim, c.Status.Message, c.Status.RetryAfter.Format(time.RFC3339))), 0
	}
	if err := pl.store.DeleteClaim(ctx, c); err != nil {
		return nil, fwk.AsStatus(err), 0
	}
	return nil, nil, c.Status.Attempts
}

// clearNomination drops a nomination a claim gave: kube-scheduler keeps a
// pod's nominated node unless a PostFilter result says otherwise. A new
// value each time: the framework may keep or change what it is given.
func clearNomination() *fwk.NominatingInfo {
	return &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: ""}
}

// PostFilter claims room for a single research pod (e.g. a slurmd worker)
// or, for a member of a label gang, for the whole gang's remaining members.
// A pod left without a live claim loses the nomination an earlier claim
// gave it, so a claim given up holds no node.
func (pl *OverflowPreemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	res, st := pl.postFilter(ctx, pod)
	if !st.IsSuccess() && res == nil && pod.Status.NominatedNodeName != "" {
		res = &fwk.PostFilterResult{NominatingInfo: clearNomination()}
	}
	return res, st
}

func (pl *OverflowPreemption) postFilter(ctx context.Context, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	if err := pl.ready(ctx); err != nil {
		return nil, fwk.AsStatus(err)
	}
	if !pl.classes.IsResearch(pod) {
		if st := pl.refused(pod); st != nil {
			return nil, st
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNotResearch+": only research pods claim room from production")
	}
	key := pod.Namespace + "/" + pod.Name
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
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
		owner = ownerOf(lg.PodGroup)
		members, err := pl.gangs.MembersOf(g, gang.HandleScheduler(pl.handle))
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		pinned, claimants = members.PlacedNodes(), members.Pending
	} else if ok {
		// Native gang members are handled as a group (PodGroupPostFilter).
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if !pl.store.Served() {
		pl.waiting.Add(claimants...)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": ResearchClaims are not served by this cluster; install manifests/crds")
	}
	c, status, attempts := pl.existing(ctx, pod.Namespace, key)
	if status != nil {
		// Retried when the given-up claim is deleted after its backoff.
		pl.waiting.Add(claimants...)
		return nil, status
	}
	if c != nil {
		return nominate(pod, c)
	}
	p, why, blocking := pl.planFor(claimants, pinned, req)
	if p == nil {
		pl.stays(blocking, pod.Namespace, key)
		pl.noClaim(claimants, why)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": "+why)
	}
	nominations := p.Assign(claimants)
	c, err := pl.start(ctx, key, owner, claimants, p, nominations, attempts)
	if err != nil {
		return nil, claimFailed(err)
	}
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

// claimFailed turns a failure to record a claim into a status: a claim
// that exists already (another cycle made it) is tried again next cycle.
func claimFailed(err error) *fwk.Status {
	if apierrors.IsAlreadyExists(err) {
		return fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": a claim for these pods was just made; it is used next time")
	}
	return fwk.AsStatus(fmt.Errorf("recording the claim: %w", err))
}

// ownerOf is the owner reference of a gang's PodGroup.
func ownerOf(pg runtime.Object) metav1.OwnerReference {
	switch pg := pg.(type) {
	case *podgroupv1alpha1.PodGroup:
		return metav1.OwnerReference{APIVersion: podgroupv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup", Name: pg.Name, UID: pg.UID}
	case *schedulingv1beta1.PodGroup:
		return metav1.OwnerReference{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup", Name: pg.Name, UID: pg.UID}
	}
	return metav1.OwnerReference{}
}

func nominate(pod *v1.Pod, c *v1alpha1.ResearchClaim) (*fwk.PostFilterResult, *fwk.Status) {
	for _, cl := range c.Spec.Claimants {
		if cl.UID == pod.UID {
			return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: cl.Node, NominatingMode: fwk.ModeOverride}}, fwk.NewStatus(fwk.Success)
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("claim %s does not cover this pod", c.Name))
}

// refused is the status of research-class pods the tenancy policy keeps
// out of research (their namespace is not selected), or nil; they are
// retried when a namespace's labels change.
func (pl *OverflowPreemption) refused(pods ...*v1.Pod) *fwk.Status {
	setting := pl.classes.Refused(pods[0])
	if setting == "" {
		return nil
	}
	pl.waiting.Add(pods...)
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: namespace %s is not in %s (OverflowPreemption's args), so its pods of PriorityClass %s are not research and claim nothing",
		ReasonNotResearch, pods[0].Namespace, setting, pods[0].Spec.PriorityClassName))
}

// PodGroupPostFilter claims one fabric domain for a native gang. Before
// anything is evicted, the plan is checked by the scheduler itself: the
// victims are removed from a copy of the snapshot and the whole gang is
// scheduled there, so only a claim that really makes the gang fit evicts.
// (A group that gets no claim loses its pods' nominations: kube-scheduler
// clears them itself when PodGroupPostFilter fails.)
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
		if st := pl.refused(pods...); st != nil {
			return nil, st
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNotResearch+": only research gangs claim room from production")
	}
	if !pl.store.Served() {
		pl.waiting.Add(pods...)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": ResearchClaims are not served by this cluster; install manifests/crds")
	}
	gkey := gang.Key{API: gang.Native, Namespace: pg.Namespace, Name: pg.Name}
	key := gkey.String()
	c, status, attempts := pl.existing(ctx, pg.Namespace, key)
	if status != nil {
		pl.waiting.Add(pods...)
		return nil, status
	}
	if c != nil {
		return groupNominations(pods, c), fwk.NewStatus(fwk.Success)
	}
	g, err := pl.gangs.NativeGang(pg)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoClaim+": "+err.Error())
	}
	members, err := pl.gangs.MembersOf(gkey, gang.HandleScheduler(pl.handle))
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	p, why, blocking := pl.planFor(pods, members.PlacedNodes(), g.Request)
	if p == nil {
		pl.stays(blocking, pg.Namespace, key)
		pl.noClaim(pods, why)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": "+why)
	}
	nominations, st := pl.verify(ctx, p, schedule)
	if !st.IsSuccess() {
		pl.noClaim(pods, st.Message())
		return nil, st
	}
	owner := ownerOf(pg)
	c, err = pl.start(ctx, key, owner, pods, p, nominations, attempts)
	if err != nil {
		return nil, claimFailed(err)
	}
	return groupNominations(pods, c), fwk.NewStatus(fwk.Success)
}

// verify removes the plan's victims from a copy of the snapshot, runs the
// gang's scheduling there, and returns where its pods would go.
func (pl *OverflowPreemption) verify(ctx context.Context, p *plan.Plan, schedule fwk.PodGroupSchedulingFunc) (map[string]string, *fwk.Status) {
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
	for node, victims := range p.Claim.Victims {
		for _, v := range victims {
			if err := snap.RemovePod(logger, v, node); err != nil {
				return nil, fwk.AsStatus(err)
			}
		}
	}
	res, st := schedule(ctx)
	if !st.IsSuccess() {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: freeing %s would not be enough: %s", ReasonNoClaim, p.Claim.Domain.Name, st.Message()))
	}
	out := map[string]string{}
	for _, a := range res.ProposedAssignments {
		out[a.GetPod().Namespace+"/"+a.GetPod().Name] = a.GetNodeName()
	}
	return out, nil
}

func groupNominations(pods []*v1.Pod, c *v1alpha1.ResearchClaim) *fwk.PodGroupPostFilterResult {
	res := &fwk.PodGroupPostFilterResult{NominatingInfos: map[types.NamespacedName]*fwk.NominatingInfo{}}
	nodes := map[types.UID]string{}
	for _, cl := range c.Spec.Claimants {
		nodes[cl.UID] = cl.Node
	}
	for _, p := range pods {
		if node, ok := nodes[p.UID]; ok {
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
