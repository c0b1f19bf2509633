// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
)

// Reasons pods are moved, for metrics and events.
const (
	// MovePreemption: to the overflow nodes, for a research claim.
	MovePreemption = "preemption"
	// MoveReturn: back to physical nodes.
	MoveReturn = "return"
)

// Waves evicts pods through the Eviction API, which enforces every
// PodDisruptionBudget, with an Event on each pod saying why it moves. What
// a wave takes, and when the next may start, the claim engine and the
// return controller decide (Budgets; each victim's own replacement).
type Waves struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	reason   string // MovePreemption or MoveReturn
}

// NewWaves evicts with client, recording Events with recorder, for reason
// (MovePreemption or MoveReturn).
func NewWaves(client kubernetes.Interface, recorder events.EventRecorder, reason string) *Waves {
	return &Waves{
		client:   client,
		recorder: recorder,
		reason:   reason,
	}
}

// Evict evicts one pod. It returns false when a budget forbids it now
// (HTTP 429), so the pod stays pending, and an error on other failures.
func (w *Waves) Evict(ctx context.Context, pod *v1.Pod, note string) (bool, error) {
	err := w.client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))},
	})
	if apierrors.IsTooManyRequests(err) {
		return false, nil
	}
	return w.moved(ctx, pod, note, "evicting", err)
}

// Move moves one pod spending budget: through Evict, or, when a killed
// leader left the pod's eviction half done (Budget.Spent: the budget
// already counts the pod as gone), through Finish, which spends nothing
// more. Callers check the budget's allowance only when it is not spent.
func (w *Waves) Move(ctx context.Context, pod *v1.Pod, budget Budget, now time.Time, note string) (bool, error) {
	if budget.Spent(pod, now) {
		return w.Finish(ctx, pod, note)
	}
	return w.Evict(ctx, pod, note)
}

// Finish completes an eviction the Eviction API approved but did not
// carry out (Budget.Spent): it deletes the pod, which the budget already
// counts as gone. It returns what Evict returns.
func (w *Waves) Finish(ctx context.Context, pod *v1.Pod, note string) (bool, error) {
	err := w.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	return w.moved(ctx, pod, note+" (finishing an eviction its PodDisruptionBudget already counts)", "finishing the eviction of", err)
}

// moved records a pod's move once its eviction or delete answered err: a
// pod already gone (or replaced under its name) counts as moved, without
// an Event.
func (w *Waves) moved(ctx context.Context, pod *v1.Pod, note, doing string, err error) (bool, error) {
	switch {
	case err == nil:
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return true, nil
	default:
		return false, fmt.Errorf("%s %s/%s: %w", doing, pod.Namespace, pod.Name, err)
	}
	metrics.OverflowEvictions.WithLabelValues(w.reason).Inc()
	if w.recorder != nil {
		w.recorder.Eventf(pod, nil, v1.EventTypeNormal, eventReason(w.reason), "Evicting", "%s", note)
	}
	klog.FromContext(ctx).V(2).Info("Evicted production pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "reason", w.reason, "note", note)
	return true, nil
}

func eventReason(reason string) string {
	if reason == MoveReturn {
		return "ReturnedToPhysical"
	}
	return "MovedToOverflow"
}
