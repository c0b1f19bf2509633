// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
)

// waves evicts pods through the Eviction API in waves that never take a
// PodDisruptionBudget below its budget: a wave takes, per budget, at most
// the disruptions it allows now, and the next wave waits until the pods of
// the last one are gone and their ReplicaSets have Ready replacements again.
// The Eviction API enforces budgets too; planning waves keeps sluice from
// hammering it with evictions it would refuse.
type waves struct {
	client   kubernetes.Interface
	pods     corelisters.PodLister
	pdbs     policylisters.PodDisruptionBudgetLister
	rss      appslisters.ReplicaSetLister
	recorder events.EventRecorder
	reason   string // "preemption" or "return", for metrics and events
}

// wave is one set of evicted pods whose replacements are awaited.
type wave struct {
	pods    []*v1.Pod
	started time.Time
}

// next picks the next wave from pending, in order: every pod whose budgets
// all allow one more disruption (pods under no budget always fit), at most
// limit pods (0: no limit).
func (w *waves) next(pending []*v1.Pod, limit int) []*v1.Pod {
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
func (w *waves) budgetsOf(pod *v1.Pod) []*policyv1.PodDisruptionBudget {
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

// evict evicts one pod. It returns false when a budget forbids it now
// (HTTP 429), so the pod stays pending, and an error on other failures.
func (w *waves) evict(ctx context.Context, pod *v1.Pod, note string) (bool, error) {
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
	if reason == "return" {
		return "ReturnedToPhysical"
	}
	return "MovedToOverflow"
}

// done reports whether a wave has finished: its pods are gone and every
// ReplicaSet that owned one has its replicas Ready again.
func (w *waves) done(wv *wave) bool {
	for _, p := range wv.pods {
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

// claim is a research pod or gang's claim on physical GPUs: production
// pods to move to overflow nodes, and where the claimant's pods go.
type claim struct {
	key    string
	domain string
	// claimants are the research pods the room is for.
	claimants []*v1.Pod
	// nominations map claimant (namespace/name) to its node.
	nominations map[string]string
	pending     []*v1.Pod
	victims     int
	wave        *wave
	waves       int
	started     time.Time
	progressAt  time.Time
	bound       map[types.UID]bool
	note        string
}

// claims is the set of claims in progress, advanced by a background loop.
type claims struct {
	waves   *waves
	timeout time.Duration
	// activate puts pods back in the active queue (the framework's
	// Activate); nil in tests.
	activate func(ctx context.Context, pods []*v1.Pod)

	mu     sync.Mutex
	byKey  map[string]*claim
	byNode map[string]string // node -> claim key, for nodes being freed
}

func newClaims(w *waves, timeout time.Duration) *claims {
	return &claims{waves: w, timeout: timeout, byKey: map[string]*claim{}, byNode: map[string]string{}}
}

// get returns the claim of a claimant key, if any.
func (cs *claims) get(key string) *claim {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byKey[key]
}

// nodeClaimed reports whether a node is being freed for some claim.
func (cs *claims) nodeClaimed(node string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_, ok := cs.byNode[node]
	return ok
}

// active reports whether any claim is in progress.
func (cs *claims) active() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.byKey) > 0
}

// add starts a claim.
func (cs *claims) add(c *claim) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.byKey[c.key] = c
	for _, n := range c.nominations {
		cs.byNode[n] = c.key
	}
	for _, v := range c.pending {
		cs.byNode[v.Spec.NodeName] = c.key
	}
	metrics.ClaimsActive.Set(float64(len(cs.byKey)))
}

// bound records a claimant bound; the claim ends when all are.
func (cs *claims) boundPod(pod *v1.Pod) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for key, c := range cs.byKey {
		if _, ok := c.nominations[pod.Namespace+"/"+pod.Name]; !ok {
			continue
		}
		c.bound[pod.UID] = true
		if len(c.bound) >= len(c.nominations) {
			metrics.ClaimDuration.Observe(time.Since(c.started).Seconds())
			metrics.ClaimVictims.Observe(float64(c.victims))
			metrics.ClaimWaves.Observe(float64(c.waves))
			cs.removeLocked(key)
		}
		return
	}
}

func (cs *claims) removeLocked(key string) {
	delete(cs.byKey, key)
	for n, k := range cs.byNode {
		if k == key {
			delete(cs.byNode, n)
		}
	}
	metrics.ClaimsActive.Set(float64(len(cs.byKey)))
}

// run advances claims until ctx ends.
func (cs *claims) run(ctx context.Context, every time.Duration) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			cs.step(ctx)
		}
	}
}

// step advances every claim by at most one wave.
func (cs *claims) step(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cs.mu.Lock()
	list := make([]*claim, 0, len(cs.byKey))
	for _, c := range cs.byKey {
		list = append(list, c)
	}
	cs.mu.Unlock()
	for _, c := range list {
		if !cs.claimantsExist(c) {
			logger.V(2).Info("Claim dropped: its pods are gone", "claim", c.key)
			cs.remove(c.key)
			continue
		}
		if c.wave != nil {
			if !cs.waves.done(c.wave) {
				if time.Since(c.progressAt) > cs.timeout {
					cs.giveUp(ctx, c, "a wave's replacements did not become Ready")
				}
				continue
			}
			c.wave, c.progressAt = nil, time.Now()
			if len(c.pending) == 0 && cs.activate != nil {
				// The room is free: retry the claimants now rather than
				// when some unrelated event or the periodic flush of
				// unschedulable pods requeues them.
				cs.activate(ctx, c.claimants)
			}
		}
		if len(c.pending) == 0 {
			// Evictions done; the claim stays (keeping its nominations)
			// until its pods are bound or it times out.
			if time.Since(c.progressAt) > cs.timeout {
				cs.giveUp(ctx, c, "its pods were not bound after the room was freed")
			}
			continue
		}
		next := cs.waves.next(c.pending, 0)
		if len(next) == 0 {
			if time.Since(c.progressAt) > cs.timeout {
				cs.giveUp(ctx, c, "PodDisruptionBudgets allowed no eviction")
			}
			continue
		}
		var evicted []*v1.Pod
		for _, v := range next {
			note := fmt.Sprintf("moving to an overflow node so %s gets %s (%s, wave %d)", c.key, c.domain, c.note, c.waves+1)
			ok, err := cs.waves.evict(ctx, v, note)
			if err != nil {
				logger.Error(err, "Eviction failed", "claim", c.key)
				continue
			}
			if ok {
				evicted = append(evicted, v)
			}
		}
		if len(evicted) == 0 {
			continue
		}
		metrics.OverflowWaves.WithLabelValues("preemption").Inc()
		c.waves++
		c.wave = &wave{pods: evicted, started: time.Now()}
		c.progressAt = time.Now()
		c.pending = without(c.pending, evicted)
		logger.V(2).Info("Eviction wave started", "claim", c.key, "wave", c.waves, "evicted", len(evicted), "pending", len(c.pending))
	}
}

func (cs *claims) claimantsExist(c *claim) bool {
	for _, p := range c.claimants {
		if cur, err := cs.waves.pods.Pods(p.Namespace).Get(p.Name); err == nil && cur.UID == p.UID {
			return true
		}
	}
	return false
}

func (cs *claims) giveUp(ctx context.Context, c *claim, why string) {
	klog.FromContext(ctx).Info("Research claim given up", "claim", c.key, "why", why, "pendingVictims", len(c.pending))
	if cs.waves.recorder != nil {
		for _, p := range c.claimants {
			cs.waves.recorder.Eventf(p, nil, v1.EventTypeWarning, "ClaimGivenUp", "Preempting",
				"gave up freeing %s after %s: %s", c.domain, cs.timeout, why)
		}
	}
	cs.remove(c.key)
}

func (cs *claims) remove(key string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.removeLocked(key)
}

func without(pods, drop []*v1.Pod) []*v1.Pod {
	gone := map[types.UID]bool{}
	for _, p := range drop {
		gone[p.UID] = true
	}
	var out []*v1.Pod
	for _, p := range pods {
		if !gone[p.UID] {
			out = append(out, p)
		}
	}
	return out
}
