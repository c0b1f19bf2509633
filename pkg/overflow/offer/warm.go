// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package offer

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Make-before-break: the protocol between the claim engine and an overflow
// node, all of it in the API so that either side may restart at any point.
//
//   - The scheduler writes a ResearchClaim whose spec.makeBeforeBreak is
//     true; each victim names its target overflow node, its controller and
//     its template hash (TemplateHash).
//   - The overflow node watches claims. For every victim of a live claim
//     that targets it and is not evicted, it starts a warm remote instance
//     from the victim pod (id provider.WarmIDFor(victim UID)), and reports
//     on the victim pod, in condition WarmCondition, how it stands.
//   - The claim engine evicts a victim once WarmCondition is True, or, when
//     it is False with a final reason (WarmFailed, WarmExpired) or the
//     claim's warm timeout has passed, without one (break-before-make, with
//     an Event).
//   - The victim's replacement, bound to the overflow node, adopts a warm
//     instance of an evicted victim of the same controller and template
//     hash: the provider re-points the instance at the replacement, which
//     turns Ready as soon as the node sees it.
//   - A warm instance no live claim wants, or not adopted within the
//     node's warm TTL (counted from its creation at the provider), is
//     deleted.

// WarmCondition is the pod condition an overflow node sets on a victim of
// a make-before-break claim: True when the victim's warm instance serves.
const WarmCondition v1.PodConditionType = "overflow.sluice.dev/WarmReady"

// Reasons of WarmCondition.
const (
	// WarmStarting: the warm instance is being started (False).
	WarmStarting = "WarmStarting"
	// WarmReady: it serves (True).
	WarmReady = "WarmReady"
	// WarmFailed: no provider could start it, or it failed (False,
	// final: the victim moves without one).
	WarmFailed = "WarmFailed"
	// WarmExpired: it was not adopted within the node's TTL and was
	// deleted (False, final).
	WarmExpired = "WarmExpired"
)

// Warm reads a pod's WarmCondition: ready when True, final when False
// for good (the pod is not warmed again), and the condition's message.
func Warm(pod *v1.Pod) (ready, final bool, message string, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type != WarmCondition {
			continue
		}
		ready = c.Status == v1.ConditionTrue
		final = !ready && (c.Reason == WarmFailed || c.Reason == WarmExpired)
		return ready, final, c.Message, true
	}
	return false, false, "", false
}

// TemplateHash is what tells the pods of one controller made from one
// template: the pod-template-hash label of a ReplicaSet's pods, the
// controller-revision-hash of a StatefulSet's; "" for other pods (matched
// by controller alone).
func TemplateHash(pod *v1.Pod) string {
	if h := pod.Labels["pod-template-hash"]; h != "" {
		return h
	}
	return pod.Labels["controller-revision-hash"]
}

// ControllerUID is the UID of the pod's controller, or "".
func ControllerUID(pod *v1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return string(ref.UID)
	}
	return ""
}
