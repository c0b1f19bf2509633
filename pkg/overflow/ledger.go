// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// Target is where a victim's replacement is expected to run: an overflow
// node and one provider behind it.
type Target struct {
	Node     string
	Provider string
}

func (t Target) String() string {
	if t.Provider == "" {
		return t.Node
	}
	return t.Node + "/" + t.Provider
}

// Reservation is room a live claim holds on an overflow provider: a victim
// not yet replaced there (pending eviction, or evicted with its
// replacement not yet Ready on the overflow node).
type Reservation struct {
	Target   Target
	Requests capacity.Resources
}

// Ledger is the room on the overflow nodes, per provider: what the
// provider offers (quota applied), minus the pods it runs and the pods
// bound to its node not yet dispatched (counted against the provider
// dispatch would pick), minus the reservations of every live claim. A
// victim is counted against one provider that can hold it whole, as
// dispatch needs, never against the sum of several.
type Ledger struct {
	slots []slot // in dispatch order: nodes by name, providers as offered
	// ready is the number of Ready overflow nodes.
	ready int
	// errs are overflow nodes whose offer could not be read (left out).
	errs []error
}

type slot struct {
	target  Target
	healthy bool
	// provider is what the overflow node offers of it: what it carries
	// and its capacity, which decide which pods it can run at all.
	provider offer.Provider
	// runs remembers provider.CanRun by pod: planning asks it for every
	// victim in every domain it tries, and the answer does not change with
	// room (clones share it).
	runs map[types.UID]error
	free capacity.Resources
	// unlimited holds anything (a what-if ledger).
	unlimited bool
}

func (s *slot) canRun(pod *v1.Pod) error {
	err, ok := s.runs[pod.UID]
	if !ok {
		err = s.provider.CanRun(pod)
		s.runs[pod.UID] = err
	}
	return err
}

// unlimited stands for a resource a provider does not limit (CPU, memory,
// storage and pod count it does not report).
const unlimited = math.MaxInt64 / 4

// NewLedger computes the room of the overflow nodes among nodes; podsOn
// lists the pods bound to a node; reservations are the live claims'.
func NewLedger(classes *Classes, nodes []*v1.Node, podsOn func(node string) []*v1.Pod, reservations []Reservation) *Ledger {
	l := &Ledger{}
	sorted := append([]*v1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, n := range sorted {
		if !classes.IsOverflowNode(n) {
			continue
		}
		ready := NodeReady(n)
		if ready {
			l.ready++
		}
		o, err := offer.Of(n, ready)
		if err != nil {
			l.errs = append(l.errs, err)
			continue
		}
		first := len(l.slots)
		for _, p := range o.Providers {
			l.slots = append(l.slots, slot{target: Target{Node: n.Name, Provider: p.Name}, healthy: p.Healthy, provider: p, runs: map[types.UID]error{}, free: freeOf(p.Capacity)})
		}
		count(l.slots[first:], podsOn(n.Name))
	}
	l.hold(reservations)
	return l
}

// count takes the room of pods (bound to one overflow node) from that
// node's slots: a pod dispatched, at its provider; one not dispatched yet,
// at the first healthy provider with room, where dispatch will put it.
func count(slots []slot, pods []*v1.Pod) {
	for _, pod := range pods {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		req := capacity.RequestsOf(pod)
		i := providerIndex(slots, offer.ProviderOf(pod))
		if i < 0 {
			i = firstFit(slots, pod, req)
		}
		if i >= 0 {
			slots[i].free = slots[i].free.Sub(req)
		}
	}
}

// hold takes reservations from the room of their targets.
func (l *Ledger) hold(reservations []Reservation) {
	for _, r := range reservations {
		if i := l.index(r.Target); i >= 0 {
			l.slots[i].free = l.slots[i].free.Sub(r.Requests)
		}
	}
}

// RoomOn is the room behind overflow node node, whose offer is o, by
// provider, for the production profile's filter: its providers' capacity
// less pods (the pods bound to it) and held (live claims' reservations
// there). It counts room only: whether the node is Ready is the
// scheduler's taint filters' business, and a provider's health decides
// dispatch, not binding, so every provider is taken as healthy.
func RoomOn(node string, o offer.Offer, pods []*v1.Pod, held []Reservation) *Ledger {
	l := &Ledger{ready: 1}
	for _, p := range o.Providers {
		l.slots = append(l.slots, slot{target: Target{Node: node, Provider: p.Name}, healthy: true, provider: p, runs: map[types.UID]error{}, free: freeOf(p.Capacity)})
	}
	count(l.slots, pods)
	l.hold(held)
	return l
}

// freeOf turns a provider's capacity into free room, resources it does not
// limit unlimited.
func freeOf(c v1.ResourceList) capacity.Resources {
	r := capacity.ResourcesOf(c)
	for name, v := range map[v1.ResourceName]*int64{v1.ResourceCPU: &r.MilliCPU, v1.ResourceMemory: &r.Memory, v1.ResourcePods: &r.Pods} {
		if _, limited := c[name]; !limited {
			*v = unlimited
		}
	}
	return r
}

func providerIndex(slots []slot, name string) int {
	if name == "" {
		return -1
	}
	for i, s := range slots {
		if s.target.Provider == name {
			return i
		}
	}
	return -1
}

// firstFit is the first healthy provider, in dispatch order, that can run
// pod and has room for req (its requests).
func firstFit(slots []slot, pod *v1.Pod, req capacity.Resources) int {
	for i := range slots {
		s := &slots[i]
		if s.healthy && (s.unlimited || s.free.Covers(req) && s.canRun(pod) == nil) {
			return i
		}
	}
	return -1
}

func (l *Ledger) index(t Target) int {
	for i, s := range l.slots {
		if s.target == t {
			return i
		}
	}
	return -1
}

// Clone copies the ledger, so a plan can be tried and thrown away.
func (l *Ledger) Clone() *Ledger {
	out := &Ledger{slots: make([]slot, len(l.slots)), ready: l.ready, errs: l.errs}
	for i, s := range l.slots {
		out.slots[i] = slot{target: s.target, healthy: s.healthy, provider: s.provider, runs: s.runs, free: s.free.Add(capacity.Resources{}), unlimited: s.unlimited}
	}
	return out
}

// Holding is a clone of l with reservations held too: a ledger of the
// pods alone (NewLedger without reservations) may be kept while they do
// not change, and the claims' reservations held anew at each look.
func (l *Ledger) Holding(reservations []Reservation) *Ledger {
	out := l.Clone()
	out.hold(reservations)
	return out
}

// Take reserves room for pod on the first healthy provider, in dispatch
// order, that can run it and has room for all of it, and returns where;
// false when none has.
func (l *Ledger) Take(pod *v1.Pod) (Target, bool) {
	requests := capacity.RequestsOf(pod)
	i := firstFit(l.slots, pod, requests)
	if i < 0 {
		return Target{}, false
	}
	l.slots[i].free = l.slots[i].free.Sub(requests)
	return l.slots[i].target, true
}

// CannotRun says why no provider behind any overflow node, healthy or
// not, can run pod as written (offer.Portable, and the provider's whole
// capacity), or "" when one can. Health and room change; this does not,
// so a pod it names is never a victim: its replacement could run nowhere.
func (l *Ledger) CannotRun(pod *v1.Pod) string {
	if len(l.slots) == 0 {
		// No overflow node at all: Take says so ("no room", with the
		// number of Ready overflow nodes), for every victim alike.
		return ""
	}
	var whys []string
	for i := range l.slots {
		s := &l.slots[i]
		if s.unlimited {
			return ""
		}
		err := s.canRun(pod)
		if err == nil {
			return ""
		}
		whys = append(whys, s.target.Node+" "+offer.Why(err))
	}
	return "no overflow provider can run it (" + strings.Join(whys, "; ") + ")"
}

// Holds reports whether a reservation's target can still hold what is
// counted against it: its provider is healthy and not overcommitted (an
// overflow node that went NotReady, or a provider whose capacity shrank,
// does not). The reason says which, for a claim's status.
func (l *Ledger) Holds(t Target) (bool, string) {
	i := l.index(t)
	switch {
	case i < 0:
		return false, fmt.Sprintf("overflow node %s is gone", t)
	case !l.slots[i].healthy:
		return false, fmt.Sprintf("%s is not Ready", t)
	case !nonNegative(l.slots[i].free):
		return false, fmt.Sprintf("%s is full (its capacity shrank below what is counted on it)", t)
	}
	return true, ""
}

func nonNegative(r capacity.Resources) bool {
	if r.MilliCPU < 0 || r.Memory < 0 || r.Pods < 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v < 0 {
			return false
		}
	}
	return true
}

// Ready is the number of Ready overflow nodes.
func (l *Ledger) Ready() int { return l.ready }

// Errors are the overflow nodes whose offer could not be read.
func (l *Ledger) Errors() []error { return l.errs }
