// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package disruption is the disruption ledger: the one place that decides
// whether sluice may disrupt a production pod now, and the only one that
// evicts; and where the overflow room live claims hold is added to what
// any actor counts (room.go). Every actor (the claim engine, the return controller) asks it,
// and it answers from the API objects every replica reads, so two actors,
// two claims, or a new leader never count one budget twice.
//
// A budget is a pod's PodDisruptionBudget, or, for a controller without
// one, sluice's default budget (maxUnavailable of its replicas). What a
// budget allows now is read the way the disruption controller computes it:
//
//   - a PodDisruptionBudget: its status.disruptionsAllowed, less the
//     evictions this ledger issued that its status does not show yet;
//   - a default budget: the controller's healthy pods (Ready, not being
//     deleted), less the replicas that must stay healthy, less the
//     evictions this ledger issued whose pod still looks healthy.
//
// Example: a ReplicaSet of 8 without a PDB, default 25%: 2 may be down.
// Claim A evicts 2 (held until the informer shows them terminating); claim
// B asks: 8 healthy - 6 desired - 2 held = 0. The two terminate: 6 - 6 = 0
// still, until a replacement turns Ready (7 - 6 = 1), wherever it runs and
// whoever evicted. A new leader reads the same pods and gets the same
// answer; what it cannot read (an eviction issued but not yet seen) lasts
// only as long as the informers lag the apiserver.
//
// Evictions go through the Eviction API, which enforces every PDB again.
// A pod is deleted without it only to finish an eviction the caller
// recorded in the API before issuing it (Reserve's recorded) and that
// the PDB already counts (its status.disruptedPods names the pod): a
// leader killed between the two writes of an eviction.
package disruption

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
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
	// MoveProviderGone: off an overflow node's provider that is gone.
	MoveProviderGone = "provider-gone"
)

// OwnerIndex indexes pods by their controller's UID.
const OwnerIndex = "sluice.dev/controller-uid"

// Ledger is the disruption ledger of one scheduler.
type Ledger struct {
	pdbs       policylisters.PodDisruptionBudgetLister
	rss        appslisters.ReplicaSetLister
	sts        appslisters.StatefulSetLister
	rcs        corelisters.ReplicationControllerLister
	pods       corelisters.PodLister
	byOwner    cache.Indexer
	defaultMax intstr.IntOrString
	client     kubernetes.Interface
	recorder   events.EventRecorder

	mu sync.Mutex
	// held are the evictions this ledger issued, or is issuing, that the
	// informers do not show yet, by budget and pod (a budget's are counted
	// at each Reserve under it: a claim of thousands of victims has
	// thousands in flight, under hundreds of budgets); heldUnder is each
	// one's budget.
	held      map[string]map[types.UID]hold
	heldUnder map[types.UID]string
	// holdings is the overflow room live claims hold (room.go).
	holdings Holdings
}

// hold is an eviction the informers do not show yet.
type hold struct {
	budget string
	pod    *v1.Pod
	// pdbVersion is the PDB's resourceVersion when the eviction was
	// reserved: the Eviction API writes the PDB, so a newer one counts it.
	pdbVersion string
	// spends: the eviction spends the budget (an unhealthy pod the PDB
	// lets go, or an eviction being finished, does not).
	spends bool
}

// NewLedger builds a ledger over informers (the scheduler's, not started
// yet: it indexes pods by controller); defaultMax is the default budget of
// controllers without a PodDisruptionBudget. It evicts with client,
// recording Events with recorder (nil: none).
func NewLedger(inf informers.SharedInformerFactory, defaultMax intstr.IntOrString, client kubernetes.Interface, recorder events.EventRecorder) (*Ledger, error) {
	podInformer := inf.Core().V1().Pods().Informer()
	if _, ok := podInformer.GetIndexer().GetIndexers()[OwnerIndex]; !ok {
		if err := podInformer.AddIndexers(cache.Indexers{OwnerIndex: func(obj any) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return nil, nil
			}
			if ref := metav1.GetControllerOf(pod); ref != nil {
				return []string{string(ref.UID)}, nil
			}
			return nil, nil
		}}); err != nil {
			return nil, fmt.Errorf("indexing pods by controller: %w", err)
		}
	}
	return &Ledger{
		pdbs:       inf.Policy().V1().PodDisruptionBudgets().Lister(),
		rss:        inf.Apps().V1().ReplicaSets().Lister(),
		sts:        inf.Apps().V1().StatefulSets().Lister(),
		rcs:        inf.Core().V1().ReplicationControllers().Lister(),
		pods:       inf.Core().V1().Pods().Lister(),
		byOwner:    podInformer.GetIndexer(),
		defaultMax: defaultMax,
		client:     client,
		recorder:   recorder,
		held:       map[string]map[types.UID]hold{},
		heldUnder:  map[types.UID]string{},
	}, nil
}

// Synced are the informers the ledger reads: it answers only on a full
// view.
func Synced(inf informers.SharedInformerFactory) []cache.InformerSynced {
	return []cache.InformerSynced{inf.Core().V1().Pods().Informer().HasSynced,
		inf.Policy().V1().PodDisruptionBudgets().Informer().HasSynced, inf.Apps().V1().ReplicaSets().Informer().HasSynced,
		inf.Apps().V1().StatefulSets().Informer().HasSynced, inf.Core().V1().ReplicationControllers().Informer().HasSynced}
}

// PodsOf lists the pods of a controller, by its UID.
func (l *Ledger) PodsOf(ownerUID string) []*v1.Pod {
	objs, err := l.byOwner.ByIndex(OwnerIndex, ownerUID)
	if err != nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// allowed is how many more disruptions a budget allows now, every
// actor's evictions counted (l.mu held); pdb is the budget's
// PodDisruptionBudget as the informer has it (nil for a default budget).
func (l *Ledger) allowed(b Budget, pdb *policyv1.PodDisruptionBudget) int {
	if b.PDB != nil {
		if pdb == nil || !observed(pdb) {
			// Gone (the Eviction API no longer applies it, but the
			// planner chose by it: wait for a new plan), or not seen by
			// the disruption controller yet (the Eviction API refuses).
			return 0
		}
		return int(pdb.Status.DisruptionsAllowed) - l.unshown(b.Name, pdb)
	}
	healthy := 0
	for _, p := range l.PodsOf(b.Owner.UID) {
		if p.Namespace == b.Namespace && Healthy(p) {
			healthy++
		}
	}
	return healthy - b.desiredHealthy - l.unshown(b.Name, nil)
}

// unshown counts a budget's held evictions that spend it and that the
// informers do not show yet, and forgets the others: those whose pod the
// pod informer shows going (it no longer counts as healthy) and, for a
// PodDisruptionBudget, those its status shows (a newer resourceVersion,
// or the pod among its disruptedPods). Should the PDB's informer lag the
// pods', the Eviction API refuses what the status does not allow: a 429,
// never an overdraft.
func (l *Ledger) unshown(budget string, pdb *policyv1.PodDisruptionBudget) int {
	n := 0
	for uid, h := range l.held[budget] {
		shown := l.seenGoing(h.pod)
		if pdb != nil {
			_, inStatus := pdb.Status.DisruptedPods[h.pod.Name]
			shown = shown || inStatus || pdb.ResourceVersion != h.pdbVersion
		}
		if shown {
			l.drop(uid)
			continue
		}
		if h.spends {
			n++
		}
	}
	return n
}

// seenGoing reports whether the pod informer shows pod gone, replaced
// under its name, or being deleted.
func (l *Ledger) seenGoing(pod *v1.Pod) bool {
	cur, err := l.pods.Pods(pod.Namespace).Get(pod.Name)
	return err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil
}

// Move is one disruption the ledger allowed and holds: Evict carries it
// out, Release gives it back.
type Move struct {
	l      *Ledger
	pod    *v1.Pod
	Budget Budget
	// finish: the PDB already counts the pod as evicted; Evict deletes it.
	finish bool
}

// Reserve asks whether pod, whose budget is b (Of), may be disrupted now
// and, when it may, holds
// the disruption against its budget until the eviction shows (or is
// released); otherwise it says why not. recorded says the caller recorded
// in the API, before any eviction of it, that it evicts this pod (by UID):
// then an eviction the PDB already counts is finished by a delete.
//
// As the Eviction API does, a pod that is not Ready is let go without
// spending its PDB when the PDB's unhealthyPodEvictionPolicy is
// AlwaysAllow, or when the PDB has its desired healthy pods
// (IfHealthyBudget, the default); a default budget treats such a pod as
// IfHealthyBudget does.
func (l *Ledger) Reserve(pod *v1.Pod, b Budget, recorded bool) (*Move, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if budget, ok := l.heldUnder[pod.UID]; ok {
		return nil, fmt.Sprintf("its eviction is in flight (%s)", budget)
	}
	h := hold{budget: b.Name, pod: pod, spends: true}
	mv := &Move{l: l, pod: pod, Budget: b}
	var pdb *policyv1.PodDisruptionBudget
	if b.PDB != nil {
		var err error
		if pdb, err = l.pdbs.PodDisruptionBudgets(b.PDB.Namespace).Get(b.PDB.Name); err != nil {
			return nil, b.String() + " is gone"
		}
		h.pdbVersion = pdb.ResourceVersion
	}
	allowed := l.allowed(b, pdb)
	switch {
	case pdb != nil && recorded && listed(pdb, pod):
		mv.finish, h.spends = true, false
	case !Healthy(pod) && pdb != nil && pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow:
		h.spends = false
	case !Healthy(pod) && pdb != nil && observed(pdb) && pdb.Status.DesiredHealthy > 0 && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy:
		h.spends = false
	case !Healthy(pod) && pdb == nil && allowed >= 0:
		h.spends = false
	case allowed <= 0:
		return nil, b.String() + " allows no more now"
	}
	if l.held[h.budget] == nil {
		l.held[h.budget] = map[types.UID]hold{}
	}
	l.held[h.budget][pod.UID] = h
	l.heldUnder[pod.UID] = h.budget
	return mv, ""
}

// drop forgets a held eviction (l.mu held).
func (l *Ledger) drop(uid types.UID) {
	budget, ok := l.heldUnder[uid]
	if !ok {
		return
	}
	delete(l.heldUnder, uid)
	delete(l.held[budget], uid)
	if len(l.held[budget]) == 0 {
		delete(l.held, budget)
	}
}

// listed reports whether a PDB counts pod as disrupted already.
func listed(pdb *policyv1.PodDisruptionBudget, pod *v1.Pod) bool {
	_, ok := pdb.Status.DisruptedPods[pod.Name]
	return ok && pod.DeletionTimestamp == nil
}

// Release gives back a disruption that will not be carried out.
func (m *Move) Release() {
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	m.l.drop(m.pod.UID)
}

// Evict carries the move out through the Eviction API (or finishes an
// eviction the PDB already counts), with an Event on the pod saying why
// it moves (reason MovePreemption or MoveReturn; note the why). It returns
// false when the apiserver's budget forbids it now (429), true when the
// pod is moved or already gone, and an error on other failures; the
// disruption stays held only when the eviction went through.
func (m *Move) Evict(ctx context.Context, reason, note string) (bool, error) {
	pod := m.pod
	var err error
	doing := "evicting"
	if m.finish {
		doing, note = "finishing the eviction of", note+" (finishing an eviction its PodDisruptionBudget already counts)"
		err = m.l.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	} else {
		err = m.l.client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))},
		})
	}
	switch {
	case err == nil:
	case apierrors.IsTooManyRequests(err):
		m.Release()
		return false, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone, or replaced under its name: moved, nothing spent.
		m.Release()
		return true, nil
	default:
		m.Release()
		return false, fmt.Errorf("%s %s/%s: %w", doing, pod.Namespace, pod.Name, err)
	}
	metrics.OverflowEvictions.WithLabelValues(reason).Inc()
	if m.l.recorder != nil {
		m.l.recorder.Eventf(pod, nil, v1.EventTypeNormal, eventReason(reason), "Evicting", "%s", note)
	}
	klog.FromContext(ctx).V(2).Info("Evicted production pod", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "reason", reason, "budget", m.Budget.Name, "note", note)
	return true, nil
}

func eventReason(reason string) string {
	switch reason {
	case MoveReturn:
		return "ReturnedToPhysical"
	case MoveProviderGone:
		return "ProviderGone"
	}
	return "MovedToOverflow"
}
