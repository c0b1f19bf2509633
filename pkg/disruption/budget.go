// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package disruption

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Budget is what paces the disruption of a production pod: its
// PodDisruptionBudget, or, for a controller without one, sluice's default
// budget for that controller (like a rolling update's maxUnavailable).
type Budget struct {
	// Name is "pdb/<namespace>/<name>" or "default/<namespace>/<kind>/<name>".
	Name string
	// PDB is the PodDisruptionBudget (nil for a default budget).
	PDB *policyv1.PodDisruptionBudget
	// Owner is the pod's controller; a default budget counts its pods.
	Owner Owner
	// Namespace is the pods' namespace.
	Namespace string
	// Capacity is how many of its pods may be unavailable at once when
	// all are healthy.
	Capacity int
	// desiredHealthy is, for a default budget, how many of the
	// controller's pods must stay healthy: replicas less Capacity.
	desiredHealthy int
}

// String names the budget for people: "PodDisruptionBudget serve", or
// "the default budget of prod/ReplicaSet/serve".
func (b Budget) String() string {
	if b.PDB != nil {
		return "PodDisruptionBudget " + b.PDB.Name
	}
	return "the default budget of " + strings.TrimPrefix(b.Name, "default/")
}

// Owner is a pod's controller, the one that replaces it.
type Owner struct {
	Kind string
	Name string
	UID  string
}

// OwnerOf is a pod's controller, if it is one whose replacements sluice
// follows; otherwise why not.
func OwnerOf(pod *v1.Pod) (Owner, string) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Owner{}, "it has no controller: nothing would replace it"
	}
	switch ref.Kind {
	case "ReplicaSet", "StatefulSet", "ReplicationController":
		return Owner{Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}, ""
	}
	return Owner{}, fmt.Sprintf("it is owned by %s %s, whose replacements sluice does not follow", ref.Kind, ref.Name)
}

// Of returns the budget that paces a pod's disruption, or why the pod may
// not be moved at all: a pod is movable when a controller that sluice
// follows replaces it (ReplicaSet, StatefulSet, ReplicationController) and
// exactly one budget allows it some disruption, now or once its other
// pods are healthy again. PodDisruptionBudgets select as policy/v1 does:
// an empty selector selects every pod of its namespace, a missing one
// none; the Eviction API refuses a pod under more than one.
func (l *Ledger) Of(pod *v1.Pod) (Budget, string) {
	owner, why := OwnerOf(pod)
	if why != "" {
		return Budget{}, why
	}
	pdbs := l.selecting(pod)
	switch len(pdbs) {
	case 0:
		replicas, ok := l.replicas(pod.Namespace, owner)
		if !ok {
			return Budget{}, fmt.Sprintf("its %s %s is not known yet", owner.Kind, owner.Name)
		}
		capacity, err := intstr.GetScaledValueFromIntOrPercent(&l.defaultMax, int(replicas), false)
		if err != nil {
			return Budget{}, err.Error()
		}
		capacity = max(capacity, 1)
		return Budget{Name: fmt.Sprintf("default/%s/%s/%s", pod.Namespace, owner.Kind, owner.Name), Owner: owner, Namespace: pod.Namespace,
			Capacity: capacity, desiredHealthy: max(int(replicas)-capacity, 0)}, ""
	case 1:
		pdb := pdbs[0]
		capacity := l.pdbCapacity(pdb, owner, pod.Namespace)
		if capacity <= 0 {
			return Budget{}, fmt.Sprintf("PodDisruptionBudget %s allows no disruption (%s)", pdb.Name, describePDB(pdb))
		}
		return Budget{Name: "pdb/" + pdb.Namespace + "/" + pdb.Name, PDB: pdb, Owner: owner, Namespace: pod.Namespace, Capacity: capacity}, ""
	}
	names := make([]string, len(pdbs))
	for i, p := range pdbs {
		names[i] = p.Name
	}
	slices.Sort(names) // the lister's order is a map's
	return Budget{}, fmt.Sprintf("it is selected by %d PodDisruptionBudgets (%s): the Eviction API refuses pods under more than one", len(pdbs), strings.Join(names, ", "))
}

// OwnerKnown reports whether the pod's controller is one the ledger
// follows and has read (Of cannot size a default budget before).
func (l *Ledger) OwnerKnown(pod *v1.Pod) bool {
	owner, why := OwnerOf(pod)
	if why != "" {
		return false
	}
	_, ok := l.replicas(pod.Namespace, owner)
	return ok
}

// selecting lists the PodDisruptionBudgets that select a pod.
func (l *Ledger) selecting(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
	all, err := l.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*policyv1.PodDisruptionBudget
	for _, p := range all {
		if p.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pdbCapacity is how many pods a PDB lets be unavailable when all its pods
// are healthy (expected less desired healthy). Its status says so once the
// disruption controller has seen its spec; before that, it is computed
// from the spec and the owner's replicas.
func (l *Ledger) pdbCapacity(pdb *policyv1.PodDisruptionBudget, owner Owner, ns string) int {
	if observed(pdb) && pdb.Status.ExpectedPods > 0 {
		return int(pdb.Status.ExpectedPods - pdb.Status.DesiredHealthy)
	}
	expected, ok := l.replicas(ns, owner)
	if !ok {
		return 0
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0
		}
		return v
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0
		}
		return int(expected) - v
	}
	return 0
}

// observed reports whether the disruption controller has seen a PDB's
// spec: the Eviction API refuses under it until it has.
func observed(pdb *policyv1.PodDisruptionBudget) bool {
	return pdb.Status.ObservedGeneration >= pdb.Generation
}

func describePDB(pdb *policyv1.PodDisruptionBudget) string {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		return fmt.Sprintf("maxUnavailable %s", pdb.Spec.MaxUnavailable.String())
	case pdb.Spec.MinAvailable != nil:
		return fmt.Sprintf("minAvailable %s of %d pods", pdb.Spec.MinAvailable.String(), pdb.Status.ExpectedPods)
	}
	return "no budget"
}

// replicas is a controller's desired replicas.
func (l *Ledger) replicas(ns string, owner Owner) (int32, bool) {
	var replicas *int32
	switch owner.Kind {
	case "ReplicaSet":
		rs, err := l.rss.ReplicaSets(ns).Get(owner.Name)
		if err != nil {
			return 0, false
		}
		replicas = rs.Spec.Replicas
	case "StatefulSet":
		ss, err := l.sts.StatefulSets(ns).Get(owner.Name)
		if err != nil {
			return 0, false
		}
		replicas = ss.Spec.Replicas
	case "ReplicationController":
		rc, err := l.rcs.ReplicationControllers(ns).Get(owner.Name)
		if err != nil {
			return 0, false
		}
		replicas = rc.Spec.Replicas
	default:
		return 0, false
	}
	if replicas == nil {
		return 1, true
	}
	return *replicas, true
}

// Settling reports whether a budget's pods are still settling from a
// move, as any replica reads it from the API: one is being deleted
// (evicted, not gone yet), or one created is neither healthy nor ended (a
// replacement still starting), each for at most window (from its deletion
// time, or its creation). A return wave waits for it, so a new leader
// waits for the moves its predecessor started, and for any other actor's;
// window bounds how long a pod that never goes, or never turns Ready,
// holds the next wave (the times are the apiserver's clock: skew shifts
// that bound, nothing else).
func (l *Ledger) Settling(b Budget, now time.Time, window time.Duration) bool {
	for _, p := range l.podsUnder(b) {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		switch {
		case p.DeletionTimestamp != nil:
			if now.Sub(p.DeletionTimestamp.Time) < window {
				return true
			}
		case !Healthy(p) && now.Sub(p.CreationTimestamp.Time) < window:
			return true
		}
	}
	return false
}

// podsUnder lists the pods a budget counts: its PodDisruptionBudget's
// selection (every pod of the namespace for an empty selector), or its
// controller's pods.
func (l *Ledger) podsUnder(b Budget) []*v1.Pod {
	if b.PDB == nil {
		return l.PodsOf(b.Owner.UID)
	}
	sel, err := metav1.LabelSelectorAsSelector(b.PDB.Spec.Selector)
	if err != nil {
		return nil
	}
	pods, _ := l.pods.Pods(b.Namespace).List(sel)
	return pods
}

// Healthy reports whether a pod counts as healthy for a budget, as the
// disruption controller counts it: Ready, and not being deleted.
func Healthy(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
