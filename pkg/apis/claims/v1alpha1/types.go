// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// GroupName is the claims group.
const GroupName = "claims.sluice.dev"

// SchemeGroupVersion is the group version of ResearchClaim.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the ResearchClaim resource.
var Resource = SchemeGroupVersion.WithResource("researchclaims")

// Kind is ResearchClaim's kind.
const Kind = "ResearchClaim"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResearchClaim is a research pod's or gang's claim on the GPUs of one
// fabric domain: the production pods to move to overflow nodes, and where
// the claimants go. It lives in the claimants' namespace, owned by the
// research pod or PodGroup (so it goes when they do).
type ResearchClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResearchClaimSpec   `json:"spec"`
	Status ResearchClaimStatus `json:"status,omitempty"`
}

// ResearchClaimSpec is what the planner decided; it does not change.
type ResearchClaimSpec struct {
	// Key identifies the claimant: "namespace/name" of a pod, or a gang's
	// "namespace/name (api)".
	Key string `json:"key"`
	// Domain is the fabric domain being freed, e.g. "leaf/l3".
	Domain string `json:"domain"`
	// Claimants are the research pods the room is for, each with the node
	// it is nominated to.
	Claimants []Claimant `json:"claimants"`
	// Victims are the production pods to move, in eviction order. They
	// are stored as VictimGroups (Pack); a claim read from the API has
	// them once Unpack has run (the claims store does it).
	Victims []Victim `json:"-"`
	// VictimGroups are Victims as stored: each group the victims of one
	// controller, with what they share (namespace, controller,
	// budget, target, requests) said once. A claim on a large domain has
	// thousands of victims: flat, each took 400 bytes, and a claim of
	// 4,096 went past etcd's request limit (1.5 MiB) and could not be
	// recorded at all; grouped, a victim takes about 100.
	VictimGroups []VictimGroup `json:"victims"`
	// TimeoutSeconds: the claim is given up when it makes no progress for
	// this long.
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// ReplacementTimeoutSeconds: an evicted victim whose replacement is
	// not placed within this long stops holding its overflow room.
	ReplacementTimeoutSeconds int64 `json:"replacementTimeoutSeconds"`
	// MakeBeforeBreak: each victim is evicted only once the overflow node
	// it targets runs a warm instance of it (its pod condition
	// overflow.sluice.dev/WarmReady is True), which its replacement
	// adopts; see pkg/overflow/offer for the protocol.
	MakeBeforeBreak bool `json:"makeBeforeBreak,omitempty"`
	// WarmTimeoutSeconds: after this long from the claim's creation, a
	// victim whose warm instance is not Ready is evicted without one.
	WarmTimeoutSeconds int64 `json:"warmTimeoutSeconds,omitempty"`
	// Note says why these victims, for their Events.
	Note string `json:"note,omitempty"`
	// Records is how many ResearchClaims record the claim (0 means 1).
	// etcd refuses an object over 1.5 MiB, and a claim's status grows
	// with its victims, so a claim of more than MaxVictimsPerRecord is
	// split: each record holds up to that many victims (and their
	// status) and the whole spec otherwise; the first is named after the
	// claimant, the others "<first>-2" to "<first>-<records>", owned by
	// the first. Each record is carried out on its own, the claim's
	// budgets shared through the disruption ledger; the claim is Freed
	// when every record is, and given up when one is.
	Records int32 `json:"records,omitempty"`
}

// MaxVictimsPerRecord is the most victims one ResearchClaim records: at
// the longest names Kubernetes allows (253 bytes, for pods and nodes), a
// record of that many, each of another controller, all evicted and
// replaced, with a gang of 512 claimants, takes about 1 MiB of etcd's
// 1.5 MiB (pkg/claims TestSplit).
const MaxVictimsPerRecord = 500

// Claimant is a research pod of the claim.
type Claimant struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	// Node is the node it is nominated to.
	Node string `json:"node"`
}

// Victim is a production pod to move.
type Victim struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Node is the physical node it leaves.
	Node string `json:"node"`
	// Owner is its controller (a ReplicaSet or StatefulSet); its
	// replacement is the next pod of the owner.
	Owner Owner `json:"owner"`
	// Budget names what paces its eviction: "pdb/<name>" for its
	// PodDisruptionBudget, "default/<owner kind>/<owner name>" for the
	// default budget of a controller without one.
	Budget string `json:"budget"`
	// Target is the overflow node and provider whose room it was counted
	// against.
	Target Target `json:"target"`
	// Requests is what its replacement needs.
	Requests v1.ResourceList `json:"requests,omitempty"`
	// TemplateHash is its template's hash (offer.TemplateHash): a
	// replacement adopts its warm instance only with the same.
	TemplateHash string `json:"templateHash,omitempty"`
}

// VictimGroup is the victims of one controller, as stored.
type VictimGroup struct {
	Namespace string `json:"namespace"`
	// Owner is their controller (a ReplicaSet or StatefulSet); a
	// victim's replacement is the next pod of the owner.
	Owner Owner `json:"owner"`
	// Budget names what paces their evictions: "pdb/<name>" for their
	// PodDisruptionBudget, "default/<owner kind>/<owner name>" for the
	// default budget of a controller without one.
	Budget string `json:"budget"`
	// Target is the overflow node and provider whose room they were
	// counted against.
	Target Target `json:"target"`
	// Requests is what each replacement needs.
	Requests v1.ResourceList `json:"requests,omitempty"`
	// TemplateHash is their template's hash (offer.TemplateHash).
	TemplateHash string `json:"templateHash,omitempty"`
	// Pods are the victims, in eviction order.
	Pods []VictimPod `json:"pods"`
}

// VictimPod is one victim of a group.
type VictimPod struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	// Node is the physical node it leaves.
	Node string `json:"node"`
}

// FromUnstructured reads a claim as stored, its victims unpacked.
func FromUnstructured(obj map[string]any) (*ResearchClaim, error) {
	c := &ResearchClaim{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, c); err != nil {
		return nil, err
	}
	c.Spec.Unpack()
	return c, nil
}

// ToUnstructured is c as stored, its victims packed.
func (c *ResearchClaim) ToUnstructured() (map[string]any, error) {
	c = c.DeepCopy()
	c.APIVersion, c.Kind = SchemeGroupVersion.String(), Kind
	c.Spec.Pack()
	c.Spec.Victims = nil
	return runtime.DefaultUnstructuredConverter.ToUnstructured(c)
}

// Pack stores Victims as VictimGroups: the victims that share namespace,
// controller, budget, target, requests and template hash are one group, in their order;
// groups are in the order of their first victim. (Each budget is paced on
// its own, so the order across groups does not change what is evicted.)
func (s *ResearchClaimSpec) Pack() {
	s.VictimGroups = nil
	for _, v := range s.Victims {
		i := slices.IndexFunc(s.VictimGroups, func(g VictimGroup) bool { return g.holds(v) })
		if i < 0 {
			s.VictimGroups = append(s.VictimGroups, VictimGroup{Namespace: v.Namespace, Owner: v.Owner, Budget: v.Budget, Target: v.Target, Requests: v.Requests, TemplateHash: v.TemplateHash})
			i = len(s.VictimGroups) - 1
		}
		s.VictimGroups[i].Pods = append(s.VictimGroups[i].Pods, VictimPod{Name: v.Name, UID: v.UID, Node: v.Node})
	}
}

// Unpack sets Victims from VictimGroups, as Pack stored them.
func (s *ResearchClaimSpec) Unpack() {
	s.Victims = nil
	for _, g := range s.VictimGroups {
		for _, p := range g.Pods {
			s.Victims = append(s.Victims, Victim{Namespace: g.Namespace, Name: p.Name, UID: p.UID, Node: p.Node,
				Owner: g.Owner, Budget: g.Budget, Target: g.Target, Requests: g.Requests, TemplateHash: g.TemplateHash})
		}
	}
}

func (g *VictimGroup) holds(v Victim) bool {
	return g.Namespace == v.Namespace && g.Owner == v.Owner && g.Budget == v.Budget && g.Target == v.Target && g.TemplateHash == v.TemplateHash && equalRequests(g.Requests, v.Requests)
}

func equalRequests(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if o, ok := b[name]; !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// Owner is a controller.
type Owner struct {
	Kind string    `json:"kind"`
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Target is where a victim's replacement is expected to run.
type Target struct {
	Node     string `json:"node"`
	Provider string `json:"provider,omitempty"`
}

// Phase is where a claim stands.
type Phase string

// Phases of a claim.
const (
	// PhaseEvicting: victims are being moved.
	PhaseEvicting Phase = "Evicting"
	// PhasePaused: no eviction now (an overflow node is NotReady or full,
	// or every budget is spent); the claim waits or times out.
	PhasePaused Phase = "Paused"
	// PhaseFreed: every victim moved; the claimants are being placed.
	PhaseFreed Phase = "Freed"
	// PhaseGivenUp: the claim timed out; nothing is evicted, its
	// nominations are released, and its claimants do not plan again
	// before status.retryAfter.
	PhaseGivenUp Phase = "GivenUp"
)

// ResearchClaimStatus is what the claim engine did.
type ResearchClaimStatus struct {
	Phase Phase `json:"phase,omitempty"`
	// Evicting are the victims whose eviction is about to be issued or
	// was issued without an answer: written before the Eviction API is
	// called, so a new leader tells a victim evicted from one that went
	// away on its own, and may finish an eviction cut off midway.
	Evicting []types.UID `json:"evicting,omitempty"`
	// Evicted are the victims evicted, with when.
	Evicted []Eviction `json:"evicted,omitempty"`
	// Replaced are the victims whose replacement is Ready on an overflow
	// node (or that are gone, or whose replacement timed out).
	Replaced []types.UID `json:"replaced,omitempty"`
	// Replacements are the pods counted as victims' replacements, each
	// once.
	Replacements []types.UID `json:"replacements,omitempty"`
	// ProgressTime is the last time the claim moved forward.
	ProgressTime metav1.Time `json:"progressTime,omitempty"`
	// Message says, in numbers, where the claim stands.
	Message string `json:"message,omitempty"`
	// RetryAfter, for a claim given up: its claimants plan no new claim
	// before it.
	RetryAfter *metav1.Time `json:"retryAfter,omitempty"`
	// Attempts counts the claims given up for this claimant (the backoff
	// doubles with each).
	Attempts int32 `json:"attempts,omitempty"`
	// Rounds counts the engine's passes that evicted something (a claim's
	// waves, though budgets are paced each on its own).
	Rounds int32 `json:"rounds,omitempty"`
}

// Eviction is one victim evicted.
type Eviction struct {
	UID  types.UID   `json:"uid"`
	Time metav1.Time `json:"time"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResearchClaimList is a list of claims.
type ResearchClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResearchClaim `json:"items"`
}

// FirstRecord is the name of the first record of c's claim (c's own name
// when c is the first; see ResearchClaimSpec.Records), and whether c is it.
func (c *ResearchClaim) FirstRecord() (string, bool) {
	for _, ref := range c.OwnerReferences {
		if ref.Kind == Kind && ref.APIVersion == SchemeGroupVersion.String() {
			return ref.Name, false
		}
	}
	return c.Name, true
}

// RecordName is the name of record i (from 1) of the claim whose first
// record is named first.
func RecordName(first string, i int) string {
	if i <= 1 {
		return first
	}
	return fmt.Sprintf("%s-%d", first, i)
}

// RecordIndex is c's place among its claim's records, from 1 (0 for a
// later record whose name RecordName did not make).
func (c *ResearchClaim) RecordIndex() int {
	first, isFirst := c.FirstRecord()
	if isFirst {
		return 1
	}
	i, err := strconv.Atoi(strings.TrimPrefix(c.Name, first+"-"))
	if err != nil || RecordName(first, i) != c.Name {
		return 0
	}
	return i
}

// ClaimPhase is the phase of a whole claim from its records (every record
// of it at hand, the first's spec.records of them expected): given up if
// one is; Freed if every record is; Paused if one is and none evicts;
// Evicting otherwise.
func ClaimPhase(records []*ResearchClaim) Phase {
	if len(records) == 0 {
		return ""
	}
	counts := map[Phase]int{}
	for _, r := range records {
		phase := r.Status.Phase
		if phase == "" {
			phase = PhaseEvicting
		}
		counts[phase]++
	}
	switch {
	case counts[PhaseGivenUp] > 0:
		return PhaseGivenUp
	case counts[PhaseFreed] == len(records) && len(records) == int(max(records[0].Spec.Records, 1)):
		return PhaseFreed
	case counts[PhaseEvicting] == 0 && counts[PhasePaused] > 0:
		return PhasePaused
	}
	return PhaseEvicting
}
