// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
)

// NodeState is a physical node as claim planning sees it.
type NodeState struct {
	Name string
	// Free is what is free on the node now.
	Free capacity.Resources
	// Eligible: the research pod may run here at all (taints, affinity,
	// Slurm health).
	Eligible bool
	// Victims are the production pods on the node that may be moved, in
	// the order they would be evicted (see VictimOrder).
	Victims []*v1.Pod
	// Blocked are the overflow-eligible production pods that may not be
	// moved now, each with why (a budget that allows none, no controller,
	// no overflow provider that can run it): they stay, and are named
	// when no domain can be freed without them.
	Blocked []Blocked
}

// Blocked is a production pod that cannot be moved, and why.
type Blocked struct {
	Pod *v1.Pod
	Why string
	// Unportable: no overflow provider can run the pod as written (it
	// stays for good, not until a budget allows).
	Unportable bool
}

// Request is a research gang (or single pod) that does not fit.
type Request struct {
	Shape capacity.Shape
	// Pods to place.
	Pods int
	// MaxLevel is the highest fabric level the gang may span.
	MaxLevel int
	// Pinned are tree indices of nodes where members already run.
	Pinned []int
	// Namespace is the gang's: what the plan says is said to it, and
	// names only its own pods (others are counted).
	Namespace string
}

// NameFor names a pod to namespace viewer: by name if it is the viewer's
// own, as "a pod of another namespace" if not.
func NameFor(viewer string, pod *v1.Pod) string {
	if pod.Namespace == viewer {
		return pod.Name
	}
	return "a pod of another namespace"
}

// Claim is what to evict so the gang fits in one domain.
type Claim struct {
	Domain *fabric.Domain
	// Nodes maps node name to the number of gang pods it gets.
	Nodes map[string]int
	// Victims maps node name to the pods to evict there.
	Victims map[string][]*v1.Pod
	// VictimCount is the number of victims.
	VictimCount int
	// Targets maps each victim (namespace/name) to the overflow provider
	// whose room it was counted against.
	Targets map[string]Target
	// Blocking, when no claim is possible, are the pods that cannot move
	// and alone stand in the way.
	Blocking []Blocked
}

// VictimOrder sorts a node's victims: the pods holding the most of the
// research pod's scarcest resource (GPUs) first, so a slot frees with the
// fewest evictions; then lower priority, then the youngest.
func VictimOrder(victims []*v1.Pod, resource v1.ResourceName) {
	gpus := func(p *v1.Pod) int64 { return capacity.ShapeOf(p).Scalar[resource] }
	prio := func(p *v1.Pod) int32 {
		if p.Spec.Priority != nil {
			return *p.Spec.Priority
		}
		return 0
	}
	sort.SliceStable(victims, func(i, j int) bool {
		a, b := victims[i], victims[j]
		if ga, gb := gpus(a), gpus(b); ga != gb {
			return ga > gb
		}
		if pa, pb := prio(a), prio(b); pa != pb {
			return pa < pb
		}
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	})
}

// ladder is how many slots a node offers as its victims go, one by one:
// steps[k] = slots with the first k victims gone.
type ladder struct {
	node  *NodeState
	steps []int
}

func newLadder(n *NodeState, shape capacity.Shape) ladder {
	l := ladder{node: n, steps: make([]int, len(n.Victims)+1)}
	if !n.Eligible {
		return l
	}
	free := n.Free
	l.steps[0] = shape.Fit(free)
	for k, v := range n.Victims {
		free = free.Add(capacity.RequestsOf(v))
		l.steps[k+1] = shape.Fit(free)
	}
	return l
}

func (l ladder) max() int { return l.steps[len(l.steps)-1] }

// PlanClaim chooses the domain to free for a gang: at the lowest fabric
// level (up to req.MaxLevel) where moving production that may be moved
// frees room for the whole gang, and an overflow provider has room for
// every victim, the domain that needs the fewest victims, then leaves the
// fewest free slots (best fit), then comes first by name. Inside it, it
// evicts where a slot costs the fewest victims. It explains in words when
// there is no such domain, naming the pods that cannot move (and why) when
// only they stand in the way (they are also the claim's Blocking).
func PlanClaim(tree *fabric.Tree, nodes []NodeState, req Request, room *Ledger) (Claim, string, bool) {
	c, why, ok := planClaim(tree, nodes, req, room)
	if ok || !anyBlocked(nodes) {
		return c, why, ok
	}
	// Would the blocked pods have made a claim? Then they are the reason.
	all := make([]NodeState, len(nodes))
	for i, n := range nodes {
		all[i] = n
		all[i].Victims = append(append([]*v1.Pod(nil), n.Victims...), blockedPods(n.Blocked)...)
	}
	hypothetical, _, ok := planClaim(tree, all, req, unlimitedLedger(room))
	if !ok {
		return c, why, false
	}
	var names []string
	var blocking []Blocked
	other := 0
	for _, n := range nodes {
		for _, b := range n.Blocked {
			for _, v := range hypothetical.Victims[n.Name] {
				if v.UID != b.Pod.UID {
					continue
				}
				blocking = append(blocking, b)
				if b.Pod.Namespace == req.Namespace {
					names = append(names, fmt.Sprintf("%s (%s)", b.Pod.Name, b.Why))
				} else {
					other++
				}
			}
		}
	}
	sort.Strings(names)
	total, more := len(blocking), ""
	if len(names) > 6 {
		more = fmt.Sprintf(" and %d more", len(names)-6)
		names = names[:6]
	}
	if other > 0 {
		// Why another tenant's pods cannot move is theirs to know.
		names = append(names, fmt.Sprintf("%d of other namespaces", other))
	}
	return Claim{Blocking: blocking}, fmt.Sprintf("no fabric domain can be freed within what may move: freeing %s would need %d production pods that cannot move: %s%s",
		hypothetical.Domain.Name, total, strings.Join(names, ", "), more), false
}

func anyBlocked(nodes []NodeState) bool {
	for _, n := range nodes {
		if len(n.Blocked) > 0 {
			return true
		}
	}
	return false
}

func blockedPods(bs []Blocked) []*v1.Pod {
	out := make([]*v1.Pod, len(bs))
	for i, b := range bs {
		out[i] = b.Pod
	}
	return out
}

// unlimitedLedger is room for every victim: what a plan would need if
// room were no constraint.
func unlimitedLedger(l *Ledger) *Ledger {
	return &Ledger{ready: l.ready, slots: []slot{{target: Target{Node: "any"}, healthy: true, unlimited: true}}}
}

func planClaim(tree *fabric.Tree, nodes []NodeState, req Request, room *Ledger) (Claim, string, bool) {
	ladders := make([]*ladder, tree.NumNodes())
	for i := range nodes {
		idx, ok := tree.NodeIndex(nodes[i].Name)
		if !ok {
			continue
		}
		l := newLadder(&nodes[i], req.Shape)
		ladders[idx] = &l
	}
	lowest := tree.CommonLevel(req.Pinned)
	bestWhy := "no fabric domain can hold the gang even with every overflow-eligible production pod evicted"
	for level := lowest; level <= req.MaxLevel && level <= tree.RootLevel(); level++ {
		var best *Claim
		var bestLeftover int
		for _, d := range tree.Domains(level) {
			if len(req.Pinned) > 0 && !tree.Contains(d, req.Pinned[0]) {
				continue
			}
			c, leftover, why, ok := planDomain(tree, d, ladders, req, room)
			if !ok {
				if why != "" {
					bestWhy = why
				}
				continue
			}
			if best == nil || c.VictimCount < best.VictimCount ||
				(c.VictimCount == best.VictimCount && leftover < bestLeftover) ||
				(c.VictimCount == best.VictimCount && leftover == bestLeftover && d.Name < best.Domain.Name) {
				cc := c
				best, bestLeftover = &cc, leftover
			}
		}
		if best != nil {
			if best.VictimCount == 0 {
				// Room exists without evictions: the gang waits for
				// something preemption cannot fix.
				return Claim{}, fmt.Sprintf("%s has room for the gang without evicting anything; it waits for another reason", best.Domain.Name), false
			}
			return *best, "", true
		}
	}
	return Claim{}, bestWhy, false
}

// planDomain plans the evictions inside one domain.
func planDomain(tree *fabric.Tree, d *fabric.Domain, ladders []*ladder, req Request, room *Ledger) (Claim, int, string, bool) {
	var members []*ladder
	free, maxSlots := 0, 0
	for _, i := range tree.NodesOf(d) {
		if l := ladders[i]; l != nil {
			members = append(members, l)
			free += l.steps[0]
			maxSlots += l.max()
		}
	}
	if maxSlots < req.Pods {
		return Claim{}, 0, "", false
	}
	need := req.Pods - free
	// Greedy: take the next eviction step with the fewest victims per slot
	// gained, until the gang fits.
	at := make([]int, len(members)) // victims taken per member
	for need > 0 {
		bestM, bestK := -1, 0
		var bestCost float64
		for m, l := range members {
			base := l.steps[at[m]]
			for k := at[m] + 1; k < len(l.steps); k++ {
				if gain := l.steps[k] - base; gain > 0 {
					cost := float64(k-at[m]) / float64(min(gain, need))
					if bestM < 0 || cost < bestCost || (cost == bestCost && l.node.Name < members[bestM].node.Name) {
						bestM, bestK, bestCost = m, k, cost
					}
					break
				}
			}
		}
		if bestM < 0 {
			return Claim{}, 0, "", false
		}
		need -= members[bestM].steps[bestK] - members[bestM].steps[at[bestM]]
		at[bestM] = bestK
	}
	claim := Claim{Domain: d, Nodes: map[string]int{}, Victims: map[string][]*v1.Pod{}, Targets: map[string]Target{}}
	tryRoom := room.Clone()
	slots := make([]int, tree.NumNodes())
	total := 0
	for m, l := range members {
		idx, _ := tree.NodeIndex(l.node.Name)
		slots[idx] = l.steps[at[m]]
		total += slots[idx]
		for _, v := range l.node.Victims[:at[m]] {
			target, ok := tryRoom.Take(v)
			if !ok {
				return Claim{}, 0, fmt.Sprintf("the overflow nodes have no room for %s (%d Ready overflow nodes; a victim needs one provider with room for all of it); production is not evicted into nowhere",
					NameFor(req.Namespace, v), room.Ready()), false
			}
			claim.Victims[l.node.Name] = append(claim.Victims[l.node.Name], v)
			claim.Targets[v.Namespace+"/"+v.Name] = target
			claim.VictimCount++
		}
	}
	// Where the gang's pods go inside the domain once the victims are gone.
	placement, ok := tree.Overlay(slots).Place(fabric.Request{Pods: req.Pods, MaxLevel: d.Level, Pinned: req.Pinned})
	if !ok {
		return Claim{}, 0, "", false
	}
	for i, n := range placement.Nodes {
		claim.Nodes[tree.Node(i).Name] = n
	}
	return claim, total - req.Pods, "", true
}
