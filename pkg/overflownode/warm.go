// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Warm instances: make-before-break claims (the protocol is in
// pkg/overflow/offer). The node starts one for every victim of a live
// make-before-break claim that targets it and is not evicted yet, reports
// it on the victim (offer.WarmCondition), lets the victim's replacement
// adopt it, and deletes those whose victim still runs but no claim wants
// any more, and those no replacement adopted within the warm TTL (an
// evicted victim's is kept for its replacement also after its claim
// ends). What it knows is in the claims and the
// providers' listings, so a restarted node picks up where it stopped.

// warmWorkers is how many warm instances are started at once.
const warmWorkers = 8

// ClaimSource lists the ResearchClaims (pkg/claims.Store).
type ClaimSource interface {
	// Served reports whether claims are read (the CRD is served and the
	// informer synced): before, nothing is known to be unwanted.
	Served() bool
	List() []*v1alpha1.ResearchClaim
}

// SetClaims gives the node the claims it warms victims for; without it,
// make-before-break is off on this node.
func (n *Node) SetClaims(c ClaimSource) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.claims = c
}

// warmWant is a victim a live claim wants warmed on this node.
type warmWant struct {
	victim v1alpha1.Victim
	// evicted: the claim recorded its eviction (its replacement may
	// adopt the warm instance).
	evicted bool
}

// wantedWarm are the victims, by UID, of the live make-before-break claims
// that target this node and are not replaced; false while the claims are
// not known.
func (n *Node) wantedWarm() (map[types.UID]warmWant, bool) {
	n.mu.Lock()
	src := n.claims
	n.mu.Unlock()
	if src == nil || !src.Served() {
		return nil, false
	}
	out := map[types.UID]warmWant{}
	for _, c := range src.List() {
		if !claims.Live(c) || !c.Spec.MakeBeforeBreak {
			continue
		}
		replaced := sets.New(c.Status.Replaced...)
		evicted := sets.New[types.UID]()
		for _, e := range c.Status.Evicted {
			evicted.Insert(e.UID)
		}
		for _, v := range c.Spec.Victims {
			// An evicted victim's instance is wanted while its claim
			// lives, replaced or not: the claim counts a replacement once
			// it is bound, which may be before it adopted the instance
			// (a node restarted meanwhile must not drop it).
			if v.Target.Node == n.cfg.NodeName && (!replaced.Has(v.UID) || evicted.Has(v.UID)) {
				out[v.UID] = warmWant{victim: v, evicted: evicted.Has(v.UID)}
			}
		}
	}
	return out, true
}

// warmMatch is what a replacement shares with the victim whose warm
// instance it adopts.
type warmMatch struct {
	owner     v1alpha1.Owner
	namespace string
	hash      string
	// victim is the victim's name: a StatefulSet's replacement has it.
	victim string
}

func matchOf(v v1alpha1.Victim) *warmMatch {
	return &warmMatch{owner: v.Owner, namespace: v.Namespace, hash: v.TemplateHash, victim: v.Name}
}

// expired reports whether warm instance r is past the TTL: from its
// creation at the provider, else from when this process created or first
// listed it.
func (n *Node) expired(r *remote, now time.Time) bool {
	born := r.seen
	switch {
	case r.w.CreatedAt != nil:
		born = *r.w.CreatedAt
	case !r.created.IsZero():
		born = r.created
	}
	return !born.IsZero() && now.Sub(born) >= n.cfg.WarmTTL()
}

// syncWarm brings the warm instances in line with the claims: deletes the
// failed and expired ones and those no claim wants whose victim still
// runs (a victim evicted keeps its instance for its replacement, until
// the TTL, also when its claim has ended), reports the others on their
// victims, and starts the missing ones.
func (n *Node) syncWarm(ctx context.Context, now time.Time) {
	// Claims unreadable: failed and expired instances still go, on their
	// own deadline; nothing is started or dropped as unwanted.
	want, known := n.wantedWarm()
	n.mu.Lock()
	warm := maps.Clone(n.warm)
	n.mu.Unlock()
	for uid, r := range warm {
		wv, wanted := want[uid]
		if wanted {
			n.mu.Lock()
			r.requests, r.match = wv.victim.Requests, matchOf(wv.victim)
			n.mu.Unlock()
		}
		// Told only to a victim still waiting for its instance.
		tell := wanted && !wv.evicted
		where := fmt.Sprintf("warm instance %s at provider %s", r.w.ID, r.member.Config.Name)
		switch {
		case r.w.Phase == provider.Failed || r.w.Phase == provider.Succeeded:
			n.dropWarm(ctx, r, "failed", tell, offer.WarmFailed, fmt.Sprintf("%s stopped: %s", where, r.w.Message))
		case n.expired(r, now):
			n.dropWarm(ctx, r, "expired", tell, offer.WarmExpired, fmt.Sprintf("%s not adopted within %s of its creation; deleted", where, n.cfg.WarmTTL()))
		case !known:
		case tell && r.w.Ready:
			n.setWarm(ctx, r.w.Pod, v1.ConditionTrue, offer.WarmReady, where+" is Ready")
		case tell:
			n.setWarm(ctx, r.w.Pod, v1.ConditionFalse, offer.WarmStarting, where+": "+r.w.Message)
		case wanted:
			// Evicted: its replacement adopts it.
		case r.match != nil && !n.victimServes(ctx, r.w.Pod):
			// Evicted, its claim ended (its research bound, or given
			// up): its replacement may still come, until the TTL.
		default:
			n.dropWarm(ctx, r, "unwanted", false, "", "")
		}
	}
	if !known {
		return
	}
	var todo []v1alpha1.Victim
	n.mu.Lock()
	for uid, wv := range want {
		if !wv.evicted && warm[uid] == nil && !n.warmFinal[uid] {
			todo = append(todo, wv.victim)
		}
	}
	for uid := range n.warmFinal {
		if _, ok := want[uid]; !ok {
			delete(n.warmFinal, uid)
		}
	}
	for uid := range n.warmSent {
		if _, ok := want[uid]; !ok {
			delete(n.warmSent, uid)
		}
	}
	n.mu.Unlock()
	sem := make(chan struct{}, warmWorkers)
	var wg sync.WaitGroup
	for _, v := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.startWarm(ctx, v)
		}()
	}
	wg.Wait()
}

// identityEnv names an env var of pod that reads the pod's own identity
// (name, UID, node): a warm instance started from the victim would keep
// the victim's after its replacement adopts it.
func identityEnv(pod *v1.Pod) string {
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
				continue
			}
			switch path := e.ValueFrom.FieldRef.FieldPath; path {
			case "metadata.name", "metadata.uid", "spec.nodeName":
				return fmt.Sprintf("container %s env %s reads %s", c.Name, e.Name, path)
			}
		}
	}
	return ""
}

// startWarm starts a warm instance of victim v from its pod, at its
// target provider if that can take it, else at the first in dispatch
// order that can.
func (n *Node) startWarm(ctx context.Context, v v1alpha1.Victim) {
	logger := klog.FromContext(ctx).WithValues("victim", klog.KRef(v.Namespace, v.Name))
	ref := provider.PodRef{Namespace: v.Namespace, Name: v.Name, UID: v.UID}
	getCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
	pod, err := n.client.CoreV1().Pods(v.Namespace).Get(getCtx, v.Name, metav1.GetOptions{})
	cancel()
	if err != nil || pod.UID != v.UID || pod.DeletionTimestamp != nil || terminal(pod) {
		return // gone, or evicted meanwhile: its replacement starts cold
	}
	if _, final, _, _ := offer.Warm(pod); final {
		n.mu.Lock()
		n.warmFinal[v.UID] = true
		n.mu.Unlock()
		return
	}
	if why := identityEnv(pod); why != "" {
		n.finalWarm(ctx, ref, offer.WarmFailed, why+": a warm instance would keep this pod's after its replacement adopts it")
		return
	}
	n.mu.Lock()
	candidates, skipped, cannot := n.candidates(pod)
	n.mu.Unlock()
	sort.SliceStable(candidates, func(i, j int) bool {
		return candidates[i].Config.Name == v.Target.Provider && candidates[j].Config.Name != v.Target.Provider
	})
	var refs provider.Refs
	if len(candidates) > 0 {
		readCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		refs, _, err = newRefReader(n.client).read(readCtx, pod)
		cancel()
		if err != nil {
			// Tried again at the next reconcile (a Secret may be
			// created, the apiserver answer again).
			n.setWarm(ctx, ref, v1.ConditionFalse, offer.WarmStarting, "cannot read what the pod reads yet: "+err.Error())
			return
		}
	}
	id := provider.WarmIDFor(v.UID)
	m, refused := n.createAt(ctx, candidates, id, pod, refs)
	reasons := append(skipped, refused...)
	if m != nil {
		r := &remote{member: m, created: n.now(), requests: v.Requests, match: matchOf(v), w: provider.Workload{
			ID: id, Node: n.cfg.NodeName, Phase: provider.Pending, Message: "created at the provider", Pod: ref,
		}}
		n.mu.Lock()
		n.warm[v.UID] = r
		n.mu.Unlock()
		metrics.WarmInstances.WithLabelValues(m.Config.Name, "started").Inc()
		logger.V(2).Info("Started a warm instance", "provider", m.Config.Name, "id", id)
		n.setWarm(ctx, ref, v1.ConditionFalse, offer.WarmStarting, fmt.Sprintf("warm instance %s created at provider %s", id, m.Config.Name))
		return
	}
	if cannot == len(n.members) {
		n.finalWarm(ctx, ref, offer.WarmFailed, "no provider can run this pod as written: "+strings.Join(reasons, "; "))
		return
	}
	// Tried again at the next reconcile; the claim's warm timeout bounds it.
	n.setWarm(ctx, ref, v1.ConditionFalse, offer.WarmStarting, "no provider can start a warm instance now: "+strings.Join(reasons, "; "))
}

// dropWarm deletes a warm instance (unless a replacement adopted it
// meanwhile); told, its victim learns why, and is not warmed again.
func (n *Node) dropWarm(ctx context.Context, r *remote, outcome string, tell bool, reason, msg string) {
	uid := r.w.Pod.UID
	n.mu.Lock()
	if cur := n.warm[uid]; cur == nil || cur.w.ID != r.w.ID || cur.member != r.member {
		n.mu.Unlock()
		return
	}
	delete(n.warm, uid)
	n.mu.Unlock()
	callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
	err := r.member.Provider.Delete(callCtx, r.w.ID)
	cancel()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Deleting a warm instance failed; retried next reconcile", "provider", r.member.Config.Name, "id", r.w.ID)
		return
	}
	metrics.WarmInstances.WithLabelValues(r.member.Config.Name, outcome).Inc()
	klog.FromContext(ctx).Info("Deleted a warm instance", "provider", r.member.Config.Name, "id", r.w.ID, "victim", r.w.Pod.String(), "why", outcome)
	if tell {
		n.finalWarm(ctx, r.w.Pod, reason, msg)
	}
}

// finalWarm tells a victim it moves without a warm instance.
func (n *Node) finalWarm(ctx context.Context, ref provider.PodRef, reason, msg string) {
	n.mu.Lock()
	n.warmFinal[ref.UID] = true
	n.mu.Unlock()
	n.setWarm(ctx, ref, v1.ConditionFalse, reason, msg)
}

// setWarm sets the victim's WarmCondition, when its status or reason
// differs from what this process last set.
func (n *Node) setWarm(ctx context.Context, ref provider.PodRef, status v1.ConditionStatus, reason, msg string) {
	key := string(status) + "/" + reason
	n.mu.Lock()
	same := n.warmSent[ref.UID] == key
	n.mu.Unlock()
	if same {
		return
	}
	patch, err := json.Marshal(map[string]any{
		// The UID makes the patch fail on another pod of the same name.
		"metadata": map[string]any{"uid": ref.UID},
		"status": map[string]any{"conditions": []v1.PodCondition{{
			Type: offer.WarmCondition, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(n.now()),
		}}},
	})
	if err != nil {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
	defer cancel()
	_, err = n.client.CoreV1().Pods(ref.Namespace).Patch(callCtx, ref.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		n.mu.Lock()
		n.warmSent[ref.UID] = key
		n.mu.Unlock()
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Evicted meanwhile.
	default:
		klog.FromContext(ctx).V(2).Info("Reporting a warm instance on its victim failed; retried next reconcile", "victim", ref.String(), "err", err)
	}
}

// adoptWarm lets pod, bound to this node, adopt the warm instance of an
// evicted victim of the same controller and template (for a StatefulSet,
// of the same name): the provider re-points it at pod, which runs there
// from now on. Nil when there is none (pod is dispatched as usual).
func (n *Node) adoptWarm(ctx context.Context, pod *v1.Pod) *remote {
	owner := offer.ControllerUID(pod)
	if owner == "" {
		return nil
	}
	hash, now := offer.TemplateHash(pod), n.now()
	n.mu.Lock()
	var mine []*remote
	for _, r := range n.warm {
		m := r.match
		switch {
		case m == nil || string(m.owner.UID) != owner || m.namespace != pod.Namespace || m.hash != hash,
			m.owner.Kind == "StatefulSet" && m.victim != pod.Name,
			n.adopting[r.w.ID], r.w.Phase == provider.Failed || r.w.Phase == provider.Succeeded, n.expired(r, now):
			continue
		}
		mine = append(mine, r)
	}
	n.mu.Unlock()
	if len(mine) == 0 {
		return nil // the common case: read no claims for it
	}
	want, _ := n.wantedWarm()
	// Ready ones first, then those whose eviction a claim recorded, then
	// by id.
	sort.Slice(mine, func(i, j int) bool {
		a, b := mine[i], mine[j]
		if a.w.Ready != b.w.Ready {
			return a.w.Ready
		}
		if ea, eb := want[a.w.Pod.UID].evicted, want[b.w.Pod.UID].evicted; ea != eb {
			return ea
		}
		return a.w.ID < b.w.ID
	})
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	for _, r := range mine {
		victim := r.w.Pod
		if !want[victim.UID].evicted && n.victimServes(ctx, victim) {
			continue // its victim still serves: it is not this pod's to take
		}
		n.mu.Lock()
		// A reconcile may have listed it again meanwhile: take the
		// current entry of the same instance.
		cur := n.warm[victim.UID]
		if cur == nil || cur.w.ID != r.w.ID || cur.member != r.member || n.adopting[r.w.ID] {
			n.mu.Unlock()
			continue
		}
		r = cur
		delete(n.warm, victim.UID)
		n.adopting[r.w.ID] = true
		n.mu.Unlock()
		ref := provider.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
		callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		err := r.member.Provider.Adopt(callCtx, r.w.ID, ref)
		cancel()
		n.mu.Lock()
		delete(n.adopting, r.w.ID)
		if err != nil {
			if !errors.Is(err, provider.ErrNotFound) {
				n.warm[victim.UID] = r
			}
			n.mu.Unlock()
			logger.Info("Adopting a warm instance failed", "provider", r.member.Config.Name, "id", r.w.ID, "err", err)
			continue
		}
		adopted := &remote{member: r.member, created: n.now(), w: r.w}
		adopted.w.Pod = ref
		n.workloads[pod.UID] = adopted
		delete(n.held, pod.UID)
		delete(n.warmSent, victim.UID)
		n.mu.Unlock()
		metrics.WarmInstances.WithLabelValues(r.member.Config.Name, "adopted").Inc()
		n.recorder.Eventf(pod, v1.EventTypeNormal, "AdoptedWarmInstance", "Running at provider %s as %s, the warm instance started for %s before its eviction", r.member.Config.Name, r.w.ID, victim.String())
		logger.V(2).Info("Adopted a warm instance", "provider", r.member.Config.Name, "id", r.w.ID, "victim", victim.String())
		return adopted
	}
	return nil
}

// victimServes asks the apiserver whether the victim still runs (exists
// with its UID, not terminating, not finished). Errors count as serving.
func (n *Node) victimServes(ctx context.Context, ref provider.PodRef) bool {
	callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
	defer cancel()
	pod, err := n.client.CoreV1().Pods(ref.Namespace).Get(callCtx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		return true
	}
	return pod.UID == ref.UID && pod.DeletionTimestamp == nil && !terminal(pod)
}
