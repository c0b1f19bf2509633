// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package offer is what an overflow node tells the scheduler about the
// providers behind it, in an annotation on its Node: each provider's
// health and the capacity it offers (quota applied), in dispatch order.
// The overflow node writes it; the claim planner and the claim engine read
// it, so a victim is counted against one provider that can hold it, not
// against the sum of all of them. Both binaries use this package, so they
// agree on its format.
package offer

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation is the Node annotation holding an overflow node's Offer.
const Annotation = "overflow.sluice.dev/providers"

// ProviderCondition is the pod condition the overflow node sets on a pod
// it dispatched: its reason names the provider.
const ProviderCondition v1.PodConditionType = "overflow.sluice.dev/RemoteWorkload"

// Offer is what an overflow node offers.
type Offer struct {
	// Providers in dispatch order (priority, then price, then name).
	Providers []Provider `json:"providers"`
	// Warm: the node starts warm instances for the victims of
	// make-before-break claims (it reads the claims); a claim waits for
	// them only on a node that says so.
	Warm bool `json:"warm,omitempty"`
}

// Provider is one provider behind the node.
type Provider struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// Capacity is what the provider offers, quota applied. A resource it
	// does not list it does not limit (CPU, memory, storage), or, for
	// extended resources such as GPUs, it does not have.
	Capacity v1.ResourceList `json:"capacity,omitempty"`
	// Carries is what of a pod the provider can run (see Portable); nil
	// when the node does not say (it is not sluice's).
	Carries *Carries `json:"carries,omitempty"`
	// Namespaces are those whose pods the provider may run (their
	// Secrets go there); empty: any.
	Namespaces []string `json:"namespaces,omitempty"`
	// UnlistedSince is when the provider's listing began to fail (unset
	// while it lists): a new leader of the node goes on counting its
	// providerFailureTimeoutSeconds from there, not from its own start.
	UnlistedSince *metav1.Time `json:"unlistedSince,omitempty"`
}

// Encode is the annotation's value.
func (o Offer) Encode() (string, error) {
	data, err := json.Marshal(o)
	return string(data), err
}

// Of reads a Node's offer. A node without the annotation (an overflow node
// that is not sluice's) offers its allocatable as one unnamed provider,
// healthy while the node is.
func Of(node *v1.Node, ready bool) (Offer, error) {
	raw, ok := node.Annotations[Annotation]
	if !ok {
		return Offer{Providers: []Provider{{Healthy: ready, Capacity: node.Status.Allocatable.DeepCopy()}}}, nil
	}
	var o Offer
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return Offer{}, fmt.Errorf("node %s: annotation %s: %w", node.Name, Annotation, err)
	}
	if !ready {
		for i := range o.Providers {
			o.Providers[i].Healthy = false
		}
	}
	return o, nil
}

// ProviderOf is the provider a pod on an overflow node was dispatched to,
// or "" when it was not dispatched yet.
func ProviderOf(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == ProviderCondition {
			return c.Reason
		}
	}
	return ""
}
