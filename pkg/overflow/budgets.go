// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

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
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// Budget is what paces the eviction of a production pod: its
// PodDisruptionBudget, or, for a controller without one, sluice's default
// budget for that controller (like a rolling update's maxUnavailable).
type Budget struct {
	// Name is "pdb/<namespace>/<name>" or "default/<namespace>/<kind>/<name>".
	Name string
	// PDB is the PodDisruptionBudget (nil for a default budget).
	PDB *policyv1.PodDisruptionBudget
	// Capacity is how many of its pods may be unavailable at once when
	// all are healthy: what its waves may have in flight.
	Capacity int
	// Allowed is how many more disruptions it allows now (the PDB's
	// status), or Capacity for a default budget.
	Allowed int
}

// spentWindow is how long after the Eviction API spent a budget on a pod
// sluice trusts the PDB's record of it: the disruption controller drops
// the record two minutes after it was written (its DeletionTimeout) and
// counts the pod as healthy again; the margin covers clock skew between
// the apiserver and the scheduler.
const spentWindow = 90 * time.Second

// Spent reports whether the Eviction API has already spent this budget on
// pod without deleting it: the PDB lists the pod among its disruptedPods,
// recently, and the pod is not being deleted. That is an eviction cut off
// between its two writes (the budget's, then the pod's delete), as when
// the evicting leader is killed mid-request. Until the disruption
// controller drops the record the budget counts the pod as gone, so
// evicting it again is refused (429); deleting it spends nothing more.
func (b Budget) Spent(pod *v1.Pod, now time.Time) bool {
	if b.PDB == nil || pod.DeletionTimestamp != nil {
		return false
	}
	at, ok := b.PDB.Status.DisruptedPods[pod.Name]
	return ok && now.Sub(at.Time) < spentWindow
}

// Owner is a pod's controller, the one that replaces it.
type Owner struct {
	Kind string
	Name string
	UID  string
}

// Budgets decides which production pods may be moved at all, and what
// paces them: a pod is movable when a controller that sluice follows
// replaces it (ReplicaSet, StatefulSet, ReplicationController) and exactly
// one budget allows it some disruption, now or once its other pods are
// healthy again.
type Budgets struct {
	pdbs       policylisters.PodDisruptionBudgetLister
	rss        appslisters.ReplicaSetLister
	sts        appslisters.StatefulSetLister
	rcs        corelisters.ReplicationControllerLister
	defaultMax intstr.IntOrString
}

// NewBudgets reads budgets and controllers from informers (the
// scheduler's); defaultMax paces controllers without a
// PodDisruptionBudget.
func NewBudgets(informers informers.SharedInformerFactory, defaultMax intstr.IntOrString) *Budgets {
	return &Budgets{
		pdbs:       informers.Policy().V1().PodDisruptionBudgets().Lister(),
		rss:        informers.Apps().V1().ReplicaSets().Lister(),
		sts:        informers.Apps().V1().StatefulSets().Lister(),
		rcs:        informers.Core().V1().ReplicationControllers().Lister(),
		defaultMax: defaultMax,
	}
}

// OwnerOf is a pod's controller, if it is one whose replacements sluice
// follows.
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

// Of returns a movable pod's budget, or why the pod may not be moved.
func (b *Budgets) Of(pod *v1.Pod) (Budget, string) {
	owner, why := OwnerOf(pod)
	if why != "" {
		return Budget{}, why
	}
	pdbs := b.selecting(pod)
	switch len(pdbs) {
	case 0:
		replicas, ok := b.replicas(pod.Namespace, owner)
		if !ok {
			return Budget{}, fmt.Sprintf("its %s %s is not known yet", owner.Kind, owner.Name)
		}
		capacity, err := intstr.GetScaledValueFromIntOrPercent(&b.defaultMax, int(replicas), false)
		if err != nil {
			return Budget{}, err.Error()
		}
		capacity = max(capacity, 1)
		return Budget{Name: fmt.Sprintf("default/%s/%s/%s", pod.Namespace, owner.Kind, owner.Name), Capacity: capacity, Allowed: capacity}, ""
	case 1:
		pdb := pdbs[0]
		capacity, allowed := b.pdbCapacity(pdb, owner, pod.Namespace)
		if capacity <= 0 {
			return Budget{}, fmt.Sprintf("PodDisruptionBudget %s allows no disruption (%s)", pdb.Name, describePDB(pdb))
		}
		return Budget{Name: "pdb/" + pdb.Namespace + "/" + pdb.Name, PDB: pdb, Capacity: capacity, Allowed: allowed}, ""
	}
	names := make([]string, len(pdbs))
	for i, p := range pdbs {
		names[i] = p.Name
	}
	slices.Sort(names) // the lister's order is a map's
	return Budget{}, fmt.Sprintf("it is selected by %d PodDisruptionBudgets (%s): the Eviction API refuses pods under more than one", len(pdbs), strings.Join(names, ", "))
}

// Allowed is how many more disruptions a budget allows now, reading its
// PodDisruptionBudget again (a default budget: its capacity).
func (b *Budgets) Allowed(name string) (int, bool) {
	ns, rest, ok := strings.Cut(strings.TrimPrefix(name, "pdb/"), "/")
	if !strings.HasPrefix(name, "pdb/") || !ok {
		return 0, false
	}
	pdb, err := b.pdbs.PodDisruptionBudgets(ns).Get(rest)
	if err != nil {
		return 0, true
	}
	if pdb.Status.ObservedGeneration < pdb.Generation {
		// The disruption controller has not seen its spec: the Eviction
		// API refuses until it has.
		return 0, true
	}
	return int(pdb.Status.DisruptionsAllowed), true
}

// selecting lists the PodDisruptionBudgets that select a pod.
func (b *Budgets) selecting(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
	all, err := b.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*policyv1.PodDisruptionBudget
	for _, p := range all {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pdbCapacity is how many pods a PDB lets be unavailable when all its pods
// are healthy (expected minus desired healthy), and how many more it
// allows now. Its status says both once the disruption controller has
// seen its spec; before that, they are computed from the spec and the
// owner's replicas.
func (b *Budgets) pdbCapacity(pdb *policyv1.PodDisruptionBudget, owner Owner, ns string) (capacity, allowed int) {
	if pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.ExpectedPods > 0 {
		return int(pdb.Status.ExpectedPods - pdb.Status.DesiredHealthy), int(pdb.Status.DisruptionsAllowed)
	}
	expected, ok := b.replicas(ns, owner)
	if !ok {
		return 0, 0
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0
		}
		return v, 0
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0
		}
		return int(expected) - v, 0
	}
	return 0, 0
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
func (b *Budgets) replicas(ns string, owner Owner) (int32, bool) {
	var replicas *int32
	switch owner.Kind {
	case "ReplicaSet":
		rs, err := b.rss.ReplicaSets(ns).Get(owner.Name)
		if err != nil {
			return 0, false
		}
		replicas = rs.Spec.Replicas
	case "StatefulSet":
		ss, err := b.sts.StatefulSets(ns).Get(owner.Name)
		if err != nil {
			return 0, false
		}
		replicas = ss.Spec.Replicas
	case "ReplicationController":
		rc, err := b.rcs.ReplicationControllers(ns).Get(owner.Name)
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

// ReplacementOf reports whether pod replaces a victim evicted from owner
// at or after since: a pod of the same controller, created since, not
// being deleted. (A StatefulSet's replacement has the victim's name.)
func ReplacementOf(pod *v1.Pod, owner Owner, since metav1.Time) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || string(ref.UID) != owner.UID || pod.DeletionTimestamp != nil {
		return false
	}
	return !pod.CreationTimestamp.Before(&since)
}
