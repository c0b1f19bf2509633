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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
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

// Waves evicts pods through the Eviction API in waves that never take a
// PodDisruptionBudget below its budget: a wave takes, per budget, at most
// the disruptions it allows now, and the next wave waits until the pods of
// the last one are gone and their ReplicaSets have Ready replacements again.
// The Eviction API enforces budgets too; planning waves keeps sluice from
// hammering it with evictions it would refuse.
type Waves struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	pdbs     policylisters.PodDisruptionBudgetLister
	rss      appslisters.ReplicaSetLister
	recorder events.EventRecorder
	reason   string // MovePreemption or MoveReturn
}

// NewWaves evicts with client, reading pods, budgets and ReplicaSets from
// informers (the scheduler's), for reason (MovePreemption or MoveReturn).
func NewWaves(client kubernetes.Interface, informers informers.SharedInformerFactory, recorder events.EventRecorder, reason string) *Waves {
	return &Waves{
		client:   client,
		pods:     informers.Core().V1().Pods().Lister(),
		pdbs:     informers.Policy().V1().PodDisruptionBudgets().Lister(),
		rss:      informers.Apps().V1().ReplicaSets().Lister(),
		recorder: recorder,
		reason:   reason,
	}
}

// Wave is one set of evicted pods whose replacements are awaited.
type Wave struct {
	Pods    []*v1.Pod
	Started time.Time
}

// Next picks the next wave from pending, in order: every pod whose budgets
// all allow one more disruption (pods under no budget always fit), at most
// limit pods (0: no limit).
func (w *Waves) Next(pending []*v1.Pod, limit int) []*v1.Pod {
	allowed := map[types.UID]int32{}
	var out []*v1.Pod
	for _, p := range pending {
		if limit > 0 && len(out) >= limit {
			break
		}
		budgets := w.budgetsOf(p)
		ok := true
		for _, b := range budgets {
			if _, seen := allowed[b.UID]; !seen {
				allowed[b.UID] = b.Status.DisruptionsAllowed
			}
			if allowed[b.UID] <= 0 {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for _, b := range budgets {
			allowed[b.UID]--
		}
		out = append(out, p)
	}
	return out
}

// budgetsOf lists the PodDisruptionBudgets that select a pod.
func (w *Waves) budgetsOf(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
	all, err := w.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*policyv1.PodDisruptionBudget
	for _, b := range all {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// Evict evicts one pod. It returns false when a budget forbids it now
// (HTTP 429), so the pod stays pending, and an error on other failures.
func (w *Waves) Evict(ctx context.Context, pod *v1.Pod, note string) (bool, error) {
	err := w.client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))},
	})
	switch {
	case err == nil:
	case apierrors.IsTooManyRequests(err):
		return false, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return true, nil
	default:
		return false, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
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

// Done reports whether a wave has finished: its pods are gone and every
// ReplicaSet that owned one has its replicas Ready again.
func (w *Waves) Done(wv *Wave) bool {
	for _, p := range wv.Pods {
		cur, err := w.pods.Pods(p.Namespace).Get(p.Name)
		if err == nil && cur.UID == p.UID {
			return false
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" {
			continue
		}
		rs, err := w.rss.ReplicaSets(p.Namespace).Get(ref.Name)
		if err != nil {
			continue // the ReplicaSet is gone: nothing to wait for
		}
		want := int32(1)
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		if rs.Status.ReadyReplicas < want {
			return false
		}
	}
	return true
}
