// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Victims are the production pods to move, in eviction order.
	Victims []Victim `json:"victims"`
	// TimeoutSeconds: the claim is given up when it makes no progress for
	// this long.
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// ReplacementTimeoutSeconds: an evicted victim whose replacement is
	// not Ready on an overflow node within this long stops holding back
	// its budget.
	ReplacementTimeoutSeconds int64 `json:"replacementTimeoutSeconds"`
	// Note says why these victims, for their Events.
	Note string `json:"note,omitempty"`
}

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
