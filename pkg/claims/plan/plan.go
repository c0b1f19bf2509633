// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package plan is the claim planner: given research pods that do not fit
// and a scheduling snapshot, it chooses the fabric domain to free and the
// production pods to move out of it (overflow.PlanClaim), each counted
// against one overflow provider's room and paced by its budget (the
// disruption ledger), and writes the choice as a ResearchClaim for the
// claim engine (pkg/claims) to carry out. The OverflowPreemption plugin is
// its adapter to kube-scheduler: it gathers the claimants, asks, records
// and nominates.
package plan

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// Budgets says what paces a pod's disruption, or why it may not be moved
// (disruption.Ledger).
type Budgets interface {
	Of(pod *v1.Pod) (disruption.Budget, string)
	// Room is counted less the overflow room live claims hold.
	Room(counted *overflow.Ledger) *overflow.Ledger
}

// Holdings is what live claims hold (claims.Store): the nodes they free or
// nominate to. Their overflow room is the ledger's (Budgets.Room).
type Holdings interface {
	NodeClaimed(node string) bool
}

// Planner plans claims.
type Planner struct {
	Classes  *overflow.Classes
	Budgets  Budgets
	Holdings Holdings
	// External says which nodes research may use and what Slurm holds
	// there (nil: every node, nothing held).
	External capacity.External
	// GPU is the GPU resource name.
	GPU v1.ResourceName
	// Config is the claim engine's settings, written into each claim.
	Config config.ClaimsConfig
}

// Request is the research pods to place.
type Request struct {
	// Claimants are the pods still to place (a gang's pending members).
	Claimants []*v1.Pod
	// Pinned are the nodes where members already run.
	Pinned []string
	// Fabric is the gang's fabric request.
	Fabric gang.FabricRequest
}

// Plan is a claim decided but not recorded.
type Plan struct {
	Claim overflow.Claim
	Tree  *fabric.Tree
	// Unportable are the production pods passed over because no overflow
	// provider can run them.
	Unportable []overflow.Blocked
}

// Plan plans a claim for req over nodes (the snapshot) and tree. Victims
// are only production pods that may be moved (overflow-eligible, replaced
// by a controller, under exactly one budget that allows some disruption);
// the others stay and are named when they alone stand in the way. Room is
// the overflow ledger: what each provider offers minus what it runs and
// what live claims hold.
//
// Without a plan, it says why and returns the pods that cannot move and
// alone stand in the way.
func (pl *Planner) Plan(tree *fabric.Tree, nodes []fwk.NodeInfo, req Request) (*Plan, string, []overflow.Blocked) {
	template := capacity.Largest(req.Claimants, pl.GPU)
	shape := capacity.ShapeOf(template)
	var overflowNodes []*v1.Node
	podsOn := map[string][]*v1.Pod{}
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil || !pl.Classes.IsOverflowNode(node) {
			continue
		}
		overflowNodes = append(overflowNodes, node)
		for _, pi := range ni.GetPods() {
			podsOn[node.Name] = append(podsOn[node.Name], pi.GetPod())
		}
	}
	room := pl.Budgets.Room(overflow.NewLedger(pl.Classes, overflowNodes, func(n string) []*v1.Pod { return podsOn[n] }, nil))
	var states []overflow.NodeState
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil || pl.Classes.IsOverflowNode(node) {
			continue
		}
		usable, held := true, map[v1.ResourceName]int64(nil)
		if pl.External != nil {
			usable, held = pl.External.NodeExternal(node)
		}
		st := overflow.NodeState{
			Name: node.Name,
			Free: capacity.FreeOf(ni, held),
			// A node being freed for another claim is not planned twice.
			Eligible: usable && shape.Eligible(node) && !pl.Holdings.NodeClaimed(node.Name),
		}
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if !pl.Classes.Eligible(p) {
				continue
			}
			if _, why := pl.Budgets.Of(p); why != "" {
				st.Blocked = append(st.Blocked, overflow.Blocked{Pod: p, Why: why})
				continue
			}
			if why := room.CannotRun(p); why != "" {
				// Evicted, its replacement could run nowhere.
				st.Blocked = append(st.Blocked, overflow.Blocked{Pod: p, Why: why, Unportable: true})
				continue
			}
			st.Victims = append(st.Victims, p)
		}
		overflow.VictimOrder(st.Victims, pl.GPU)
		states = append(states, st)
	}
	maxLevel := tree.RootLevel()
	if req.Fabric.Mode == config.FabricModeRequired {
		if i, ok := tree.LevelIndex(req.Fabric.Level); ok {
			maxLevel = i
		}
	}
	var pinned []int
	for _, n := range req.Pinned {
		if i, ok := tree.NodeIndex(n); ok {
			pinned = append(pinned, i)
		}
	}
	c, why, ok := overflow.PlanClaim(tree, states, overflow.Request{Shape: shape, Pods: len(req.Claimants), MaxLevel: maxLevel, Pinned: pinned, Namespace: req.Claimants[0].Namespace}, room)
	if !ok {
		return nil, why, c.Blocking
	}
	p := &Plan{Claim: c, Tree: tree}
	for _, st := range states {
		for _, b := range st.Blocked {
			if b.Unportable {
				p.Unportable = append(p.Unportable, b)
			}
		}
	}
	return p, "", nil
}

// Assign maps claimants to the plan's nodes, in name order, so the same
// plan always nominates the same way.
func (p *Plan) Assign(pods []*v1.Pod) map[string]string {
	var slots []string
	names := make([]string, 0, len(p.Claim.Nodes))
	for n := range p.Claim.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for i := 0; i < p.Claim.Nodes[n]; i++ {
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

// Victims are the plan's victims, node by node in name order, each node's
// in eviction order.
func (p *Plan) Victims() []*v1.Pod {
	nodes := make([]string, 0, len(p.Claim.Victims))
	for n := range p.Claim.Victims {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []*v1.Pod
	for _, n := range nodes {
		out = append(out, p.Claim.Victims[n]...)
	}
	return out
}

// Stays are the pods of blocked inside the plan's domain: the production
// there that stays while research takes the rest.
func (p *Plan) Stays(blocked []overflow.Blocked) []overflow.Blocked {
	var out []overflow.Blocked
	for _, b := range blocked {
		if i, ok := p.Tree.NodeIndex(b.Pod.Spec.NodeName); ok && p.Tree.Contains(p.Claim.Domain, i) {
			out = append(out, b)
		}
	}
	return out
}

// Claim writes plan p as the ResearchClaim of claimant key (named after
// it, in the claimants' namespace), owned by owner (the research pod or
// the gang's PodGroup: it goes with them): each victim with its node,
// controller, budget, overflow target, requests and template hash; each
// claimant with its node in nominations; attempts, the claims of key given
// up before, in an annotation (the engine doubles its backoff with them).
func (pl *Planner) Claim(key string, owner metav1.OwnerReference, claimants []*v1.Pod, p *Plan, nominations map[string]string, attempts int32) *v1alpha1.ResearchClaim {
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: claimants[0].Namespace, Name: claims.NameOf(key), OwnerReferences: []metav1.OwnerReference{owner},
		Annotations: map[string]string{claims.AttemptsAnnotation: fmt.Sprint(attempts)},
	}}
	c.Spec = v1alpha1.ResearchClaimSpec{
		Key: key, Domain: p.Claim.Domain.Name,
		TimeoutSeconds:            pl.Config.WaveTimeoutSeconds,
		ReplacementTimeoutSeconds: pl.Config.ReplacementTimeoutSeconds,
		MakeBeforeBreak:           pl.Config.MakeBeforeBreak,
		WarmTimeoutSeconds:        pl.Config.WarmTimeoutSeconds,
	}
	victims := p.Victims()
	for _, v := range victims {
		budget, _ := pl.Budgets.Of(v)
		ctrl, _ := disruption.OwnerOf(v)
		target := p.Claim.Targets[v.Namespace+"/"+v.Name]
		c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{
			Namespace: v.Namespace, Name: v.Name, UID: v.UID, Node: v.Spec.NodeName,
			Owner:        v1alpha1.Owner{Kind: ctrl.Kind, Name: ctrl.Name, UID: types.UID(ctrl.UID)},
			Budget:       budget.Name,
			Target:       v1alpha1.Target{Node: target.Node, Provider: target.Provider},
			Requests:     resourcehelper.PodRequests(v, resourcehelper.PodResourcesOptions{}),
			TemplateHash: offer.TemplateHash(v),
		})
	}
	for _, cl := range claimants {
		if node, ok := nominations[cl.Namespace+"/"+cl.Name]; ok {
			c.Spec.Claimants = append(c.Spec.Claimants, v1alpha1.Claimant{Name: cl.Name, UID: cl.UID, Node: node})
		}
	}
	c.Spec.Note = fmt.Sprintf("%d production pods chosen as the fewest victims in %s", len(victims), p.Claim.Domain.Name)
	return c
}
