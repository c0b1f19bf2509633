// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// ConditionType is the claim's progress, on the claimants' PodGroup or, for
// a research pod outside a gang, on the pod: status True while the claim
// moves production (reason Evicting or Paused), False once the room is
// free (Freed) or the claim is given up (GivenUp); the message says in
// numbers how many victims moved, how many are moving and left, and which
// PodDisruptionBudget or overflow node holds the rest.
const ConditionType = "sluice.dev/ResearchClaim"

// ConditionWriter writes PodGroup conditions (gang.Reporter: in the
// background, only on change).
type ConditionWriter interface {
	SetCondition(key gang.Key, cond metav1.Condition)
}

// report writes the claim's progress condition where its users look: on
// the PodGroup that owns the claim, or on its research pods.
func (e *Engine) report(ctx context.Context, c *v1alpha1.ResearchClaim, claimants []*v1.Pod) {
	// No transition time: the PodGroup reporter keeps the last one while
	// the status stays, and pods get theirs below.
	cond := metav1.Condition{Type: ConditionType, Status: metav1.ConditionTrue, Reason: string(c.Status.Phase), Message: c.Status.Message}
	if c.Status.Phase == v1alpha1.PhaseFreed || c.Status.Phase == v1alpha1.PhaseGivenUp {
		cond.Status = metav1.ConditionFalse
	}
	for _, ref := range c.OwnerReferences {
		if ref.Kind == "PodGroup" {
			if e.cfg.Conditions != nil {
				e.cfg.Conditions.SetCondition(gang.Key{API: gang.API(ref.APIVersion), Namespace: c.Namespace, Name: ref.Name}, cond)
			}
			return
		}
	}
	if e.cfg.Client == nil {
		return
	}
	for _, p := range claimants {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.PodCondition{{
			Type: ConditionType, Status: v1.ConditionStatus(cond.Status), Reason: cond.Reason, Message: cond.Message,
			LastTransitionTime: lastTransition(p, cond, metav1.NewTime(e.cfg.Clock.Now())),
		}}}})
		if err != nil {
			return
		}
		if _, err := e.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			klog.FromContext(ctx).V(2).Info("Could not write the claim's condition on its pod", "pod", klog.KObj(p), "err", err)
		}
	}
}

// reportEnd says the claim ended before its room was free (its pods bound
// or gone): the condition must not stay True.
func (e *Engine) reportEnd(ctx context.Context, c *v1alpha1.ResearchClaim, claimants []*v1.Pod, why string) {
	end := c.DeepCopy()
	end.Status.Phase, end.Status.Message = v1alpha1.PhaseFreed, "claim ended: "+why
	e.report(ctx, end, claimants)
}

// lastTransition keeps the pod condition's transition time while its
// status stays.
func lastTransition(p *v1.Pod, cond metav1.Condition, now metav1.Time) metav1.Time {
	for _, pc := range p.Status.Conditions {
		if pc.Type == ConditionType && string(pc.Status) == string(cond.Status) && !pc.LastTransitionTime.IsZero() {
			return pc.LastTransitionTime
		}
	}
	return now
}
