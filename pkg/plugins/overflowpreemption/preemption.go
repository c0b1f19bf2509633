// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/apis/config"
	podgroupv1alpha1 "github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// plan is a claim decided but not started.
type plan struct {
	claim overflow.Claim
	tree  *fabric.Tree
	// unportable are the production pods passed over because no overflow
	// provider can run them.
	unportable []overflow.Blocked
}

// planFor plans a claim for pods (the claimants still to place), given the
// nodes where members already run and the gang's fabric request. Victims
// are only production pods that may be moved (overflow-eligible, replaced
// by a controller, under exactly one budget that allows some disruption);
// the others stay and are named when they alone stand in the way. Room is
// the overflow ledger: what each provider offers minus what it runs and
// what live claims hold.
//
// Without a plan, it says why and returns the pods that cannot move and
// alone stand in the way.
func (pl *OverflowPreemption) planFor(pods []*v1.Pod, pinned []string, req gang.FabricRequest) (*plan, string, []overflow.Blocked) {
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil, err.Error(), nil
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err.Error(), nil
	}
	template := capacity.Largest(pods, pl.gpu)
	shape := capacity.ShapeOf(template)
	var states []overflow.NodeState
	var overflowNodes []*v1.Node
	podsOn := map[string][]*v1.Pod{}
	for _, ni := range all {
		node := ni.Node()
		if node == nil || !pl.classes.IsOverflowNode(node) {
			continue
		}
		overflowNodes = append(overflowNodes, node)
		for _, pi := range ni.GetPods() {
			podsOn[node.Name] = append(podsOn[node.Name], pi.GetPod())
		}
	}
	ledger := overflow.NewLedger(pl.classes, overflowNodes, func(n string) []*v1.Pod { return podsOn[n] }, pl.store.Reservations())
	for _, ni := range all {
		node := ni.Node()
		if node == nil || pl.classes.IsOverflowNode(node) {
			continue
		}
		usable, held := true, map[v1.ResourceName]int64(nil)
		if pl.external != nil {
			usable, held = pl.external.NodeExternal(node)
		}
		st := overflow.NodeState{
			Name: node.Name,
			Free: capacity.FreeOf(ni, held),
			// A node being freed for another claim is not planned twice.
			Eligible: usable && shape.Eligible(node) && !pl.store.NodeClaimed(node.Name),
		}
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if !pl.classes.Eligible(p) {
				continue
			}
			if _, why := pl.ledger.Of(p); why != "" {
				st.Blocked = append(st.Blocked, overflow.Blocked{Pod: p, Why: why})
				continue
			}
			if why := ledger.CannotRun(p); why != "" {
				// Evicted, its replacement could run nowhere.
				st.Blocked = append(st.Blocked, overflow.Blocked{Pod: p, Why: why, Unportable: true})
				continue
			}
			st.Victims = append(st.Victims, p)
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
	c, why, ok := overflow.PlanClaim(tree, states, overflow.Request{Shape: shape, Pods: len(pods), MaxLevel: maxLevel, Pinned: pinnedIdx}, ledger)
	if !ok {
		return nil, why, c.Blocking
	}
	p := &plan{claim: c, tree: tree}
	for _, st := range states {
		for _, b := range st.Blocked {
			if b.Unportable {
				p.unportable = append(p.unportable, b)
			}
		}
	}
	return p, "", nil
}

// maxStayEvents bounds the Events one claim attempt writes on production
// pods that stay.
const maxStayEvents = 50

// stays tells production pods that cannot move why they stay while a
// research claim needs their room.
func (pl *OverflowPreemption) stays(pods []overflow.Blocked, claimant string) {
	rec := pl.handle.EventRecorder()
	if rec == nil {
		return
	}
	for i, b := range pods {
		if i == maxStayEvents {
			break
		}
		rec.Eventf(b.Pod, nil, v1.EventTypeWarning, ReasonStays, "Preempting", "not moved to an overflow node for research %s: %s", claimant, b.Why)
	}
}

// passedOver says how many production pods could not move, and names a
// few, for the research pods' Event.
func passedOver(pods []overflow.Blocked) string {
	if len(pods) == 0 {
		return ""
	}
	names := make([]string, 0, 3)
	for _, b := range pods[:min(3, len(pods))] {
		names = append(names, b.Pod.Namespace+"/"+b.Pod.Name)
	}
	return fmt.Sprintf("; %d production pods no overflow provider can run were passed over (%s: %s)", len(pods), strings.Join(names, ", "), pods[0].Why)
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

// start records a plan as a ResearchClaim in the apiserver (the claim
// engine carries it out) and tells the claimants why. owner is the
// research pod, or the gang's PodGroup: the claim goes with it.
func (pl *OverflowPreemption) start(ctx context.Context, key string, owner metav1.OwnerReference, claimants []*v1.Pod, p *plan, nominations map[string]string, attempts int32) (*v1alpha1.ResearchClaim, error) {
	nodes := make([]string, 0, len(p.claim.Victims))
	for n := range p.claim.Victims {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: claimants[0].Namespace, Name: claims.NameOf(key), OwnerReferences: []metav1.OwnerReference{owner},
		Annotations: map[string]string{claims.AttemptsAnnotation: fmt.Sprint(attempts)},
	}}
	c.Spec = v1alpha1.ResearchClaimSpec{
		Key: key, Domain: p.claim.Domain.Name,
		TimeoutSeconds:            pl.claimsCfg.WaveTimeoutSeconds,
		ReplacementTimeoutSeconds: pl.claimsCfg.ReplacementTimeoutSeconds,
		MakeBeforeBreak:           pl.claimsCfg.MakeBeforeBreak,
		WarmTimeoutSeconds:        pl.claimsCfg.WarmTimeoutSeconds,
	}
	var victims []*v1.Pod
	for _, n := range nodes {
		for _, v := range p.claim.Victims[n] {
			victims = append(victims, v)
			budget, _ := pl.ledger.Of(v)
			owner, _ := disruption.OwnerOf(v)
			target := p.claim.Targets[v.Namespace+"/"+v.Name]
			c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{
				Namespace: v.Namespace, Name: v.Name, UID: v.UID, Node: n,
				Owner:        v1alpha1.Owner{Kind: owner.Kind, Name: owner.Name, UID: types.UID(owner.UID)},
				Budget:       budget.Name,
				Target:       v1alpha1.Target{Node: target.Node, Provider: target.Provider},
				Requests:     resourcehelper.PodRequests(v, resourcehelper.PodResourcesOptions{}),
				TemplateHash: offer.TemplateHash(v),
			})
		}
	}
	for _, cl := range claimants {
		if node, ok := nominations[cl.Namespace+"/"+cl.Name]; ok {
			c.Spec.Claimants = append(c.Spec.Claimants, v1alpha1.Claimant{Name: cl.Name, UID: cl.UID, Node: node})
		}
	}
	c.Spec.Note = fmt.Sprintf("%d production pods chosen as the fewest victims in %s", len(victims), p.claim.Domain.Name)
	created, err := pl.store.CreateClaim(ctx, c)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("claiming %s: %s move to overflow nodes, each budget paced on its own (claim %s)%s", p.claim.Domain.Name, describe(victims), created.Name, passedOver(p.unportable))
	var inDomain []overflow.Blocked
	for _, b := range p.unportable {
		if i, ok := p.tree.NodeIndex(b.Pod.Spec.NodeName); ok && p.tree.Contains(p.claim.Domain, i) {
			inDomain = append(inDomain, b)
		}
	}
	pl.stays(inDomain, key)
	if rec := pl.handle.EventRecorder(); rec != nil {
		for _, cl := range claimants {
			rec.Eventf(cl, nil, v1.EventTypeNormal, ReasonClaiming, "Preempting", "%s", msg)
		}
	}
	klog.FromContext(ctx).V(2).Info("Research claim started", "claim", key, "domain", p.claim.Domain.Name, "victims", len(victims), "claimants", len(claimants))
	return created, nil
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
		pl.stays(blocking, key)
		pl.noClaim(claimants, why)
		return nil, fwk.NewStatus(fwk.Unschedulable, ReasonNoClaim+": "+why)
	}
	nominations := p.assign(claimants)
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
		pl.stays(blocking, key)
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
