// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// lostAfter is how many consecutive fresh listings must miss a dispatched
// pod's workload before the pod is marked Failed: one miss can be a
// listing that raced the creation.
const lostAfter = 2

// observation is one provider's answers in one reconcile.
type observation struct {
	healthErr error
	capacity  v1.ResourceList
	listed    []provider.Workload
	listErr   error
}

// Reconcile lists every provider and brings the node, the remote
// workloads and the pods' statuses in line. It is safe to call at any time.
func (n *Node) Reconcile(ctx context.Context) {
	start := n.now()
	defer func() { metrics.ReconcileDuration.Observe(time.Since(start).Seconds()) }()
	logger := klog.FromContext(ctx)

	obs := n.observe(ctx)
	byUID := n.podsByUID()

	n.mu.Lock()
	fresh := map[*Member]bool{}
	for i, m := range n.members {
		o := obs[i]
		healthy := o.healthErr == nil && o.listErr == nil
		if healthy != m.healthy || m.since.IsZero() {
			m.since = start
			logger.Info("Provider health changed", "provider", m.Config.Name, "healthy", healthy, "err", firstErr(o.healthErr, o.listErr))
		}
		m.healthy, m.err = healthy, firstErr(o.healthErr, o.listErr)
		m.listed = o.listErr == nil
		switch {
		case o.listErr == nil:
			m.unlistedSince, m.goneSaid = time.Time{}, false
		case m.unlistedSince.IsZero():
			m.unlistedSince = start
		}
		if o.capacity != nil {
			m.capacity = applyQuota(o.capacity, m.Config.Quota)
		}
		fresh[m] = o.listErr == nil
		metrics.ProviderHealthy.WithLabelValues(m.Config.Name).Set(boolFloat(healthy))
	}
	index, warm, duplicates := n.mergeLocked(obs, fresh, byUID, start)
	n.workloads, n.warm = index, warm
	n.mu.Unlock()

	n.collectGarbage(ctx, index, duplicates, byUID)
	n.syncPods(ctx, index, fresh, byUID, start)
	n.syncWarm(ctx, start)
	n.syncNode()
	n.recordWorkloads()
	n.meter(n.now())
}

// observe asks every provider, in parallel, for its health, capacity and
// listing, each call bounded by the request timeout.
func (n *Node) observe(ctx context.Context) []observation {
	obs := make([]observation, len(n.members))
	var wg sync.WaitGroup
	for i, m := range n.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := func(f func(context.Context) error) error {
				c, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
				defer cancel()
				return f(c)
			}
			o := &obs[i]
			// A failing health or capacity call stops new work there;
			// the listing alone says how its workloads are.
			o.healthErr = call(func(c context.Context) error { return m.Provider.Health(c) })
			if errors.Is(o.healthErr, context.DeadlineExceeded) {
				// Not answering at all: a listing would wait as long.
				o.listErr = fmt.Errorf("not listed: %w", o.healthErr)
				return
			}
			o.listErr = call(func(c context.Context) (err error) {
				o.listed, err = m.Provider.List(c)
				return err
			})
			if o.healthErr != nil {
				return
			}
			if err := call(func(c context.Context) (err error) {
				o.capacity, err = m.Provider.Capacity(c)
				return err
			}); err != nil {
				o.healthErr = fmt.Errorf("capacity: %w", err)
			}
		}()
	}
	wg.Wait()
	return obs
}

// mergeLocked builds the new index: fresh listings replace what a provider
// listed before; a provider that could not be listed keeps its last known
// workloads; workloads this process created in the last two intervals are
// kept even if a listing raced them. A pod listed by two providers keeps
// the one its RemoteCondition names (else the first in dispatch order);
// the others are returned as duplicates to delete.
func (n *Node) mergeLocked(obs []observation, fresh map[*Member]bool, byUID map[types.UID]*v1.Pod, now time.Time) (map[types.UID]*remote, map[types.UID]*remote, []*remote) {
	index := map[types.UID]*remote{}
	warm := map[types.UID]*remote{}
	var duplicates []*remote
	add := func(r *remote) {
		if r.w.Unadopted() {
			// A warm instance that still runs its victim (not bound
			// here): apart, so it is not collected as a pod's that is
			// gone.
			if n.adopting[r.w.ID] {
				return
			}
			if old, ok := warm[r.w.Pod.UID]; ok {
				if old.member != r.member {
					duplicates = append(duplicates, r)
				}
				return
			}
			if old := n.warm[r.w.Pod.UID]; old != nil && old.member == r.member {
				r.created, r.requests, r.match, r.seen = old.created, old.requests, old.match, old.seen
				observeStart(old, r, "warm", now)
			}
			if r.seen.IsZero() {
				r.seen = now
			}
			warm[r.w.Pod.UID] = r
			return
		}
		old, ok := index[r.w.Pod.UID]
		if !ok {
			index[r.w.Pod.UID] = r
			return
		}
		keep, drop := old, r
		if pod := byUID[r.w.Pod.UID]; pod != nil && dispatchedTo(pod) == r.member.Config.Name {
			keep, drop = r, old
		}
		index[r.w.Pod.UID] = keep
		duplicates = append(duplicates, drop)
	}
	for i, m := range n.members {
		if !fresh[m] {
			for _, r := range n.workloads {
				if r.member == m {
					add(r)
				}
			}
			for _, r := range n.warm {
				if r.member == m {
					add(r)
				}
			}
			continue
		}
		for _, w := range obs[i].listed {
			if err := w.Validate(); err != nil {
				klog.Background().Error(err, "Ignoring an invalid workload", "provider", m.Config.Name)
				continue
			}
			if w.Node != n.cfg.NodeName {
				// Another node's, or one naming no node: never this
				// node's to adopt or collect.
				continue
			}
			r := &remote{member: m, w: w}
			if old := n.workloads[w.Pod.UID]; old != nil && old.member == m {
				r.created = old.created
				observeStart(old, r, "cold", now)
			}
			add(r)
		}
	}
	grace := 2 * n.cfg.ReconcileInterval()
	for uid, r := range n.workloads {
		if _, ok := index[uid]; !ok && !r.created.IsZero() && now.Sub(r.created) < grace {
			index[uid] = r
		}
	}
	for uid, r := range n.warm {
		if _, ok := warm[uid]; !ok && !r.created.IsZero() && now.Sub(r.created) < grace {
			warm[uid] = r
		}
	}
	// A warm instance a listing still shows unadopted, though this
	// process had it adopted since, is the adopter's.
	for _, r := range index {
		if provider.IsWarm(r.w.ID) {
			if uid, _ := provider.UIDOf(r.w.ID); warm[uid] != nil && warm[uid].w.ID == r.w.ID {
				delete(warm, uid)
			}
		}
	}
	return index, warm, duplicates
}

// collectGarbage deletes remote workloads whose pod is gone or finished,
// and duplicates. A pod missing from the informer is confirmed with the
// apiserver first: a workload is never deleted on a stale cache.
func (n *Node) collectGarbage(ctx context.Context, index map[types.UID]*remote, duplicates []*remote, byUID map[types.UID]*v1.Pod) {
	logger := klog.FromContext(ctx)
	var doomed []*remote
	for uid, r := range index {
		if pod := byUID[uid]; pod != nil && !terminal(pod) {
			continue
		}
		if n.podAlive(ctx, r.w.Pod) {
			continue
		}
		doomed = append(doomed, r)
	}
	for _, r := range append(doomed, duplicates...) {
		c, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		err := r.member.Provider.Delete(c, r.w.ID)
		cancel()
		if err != nil {
			logger.Error(err, "Garbage collection failed; retried next reconcile", "provider", r.member.Config.Name, "id", r.w.ID)
			continue
		}
		metrics.GarbageCollected.WithLabelValues(r.member.Config.Name).Inc()
		logger.Info("Garbage-collected a remote workload", "provider", r.member.Config.Name, "id", r.w.ID, "pod", r.w.Pod.String())
		n.mu.Lock()
		if cur := n.workloads[r.w.Pod.UID]; cur == r {
			delete(n.workloads, r.w.Pod.UID)
		}
		n.mu.Unlock()
	}
}

// unlistedFor is how long m's listing has been failing (0 while it lists).
func (n *Node) unlistedFor(m *Member, now time.Time) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unlistedForLocked(m, now)
}

// unlistedForLocked is unlistedFor with n.mu held.
func (n *Node) unlistedForLocked(m *Member, now time.Time) time.Duration {
	if m.unlistedSince.IsZero() {
		return 0
	}
	return now.Sub(m.unlistedSince)
}

// podAlive asks the apiserver whether the pod still exists, with this UID,
// on this node, and is not finished. Errors count as alive.
func (n *Node) podAlive(ctx context.Context, ref provider.PodRef) bool {
	pod, err := n.client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		return true
	}
	return pod.UID == ref.UID && pod.Spec.NodeName == n.cfg.NodeName && !terminal(pod)
}

// syncPods translates remote state into every pod's status and fails the
// pods whose workload failed, vanished, or sits at a provider that could
// not be listed for providerFailureTimeout. A provider that lists but
// fails its health or capacity call takes no new work, and the pods whose
// workloads it lists go on as their workloads are: a control-plane blip
// fails nothing that serves.
func (n *Node) syncPods(ctx context.Context, index map[types.UID]*remote, fresh map[*Member]bool, byUID map[types.UID]*v1.Pod, now time.Time) {
	timeout := n.cfg.ProviderFailureTimeout()
	refs := newRefReader(n.client)
	// Pods at a gone provider: evicted as their budgets allow.
	gonePods, goneWaiting := map[*Member]int{}, map[*Member]int{}
	retire := func(pod *v1.Pod, m *Member, unlisted time.Duration) {
		gonePods[m]++
		out, err := n.retire(ctx, pod, m.Config.Name, unlisted)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Retiring a pod of a gone provider", "pod", klog.KObj(pod), "provider", m.Config.Name)
		}
		if out == waiting {
			goneWaiting[m]++
		}
	}
	for uid, pod := range byUID {
		if terminal(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if r := index[uid]; r != nil {
			n.clearLost(uid)
			if unlisted := n.unlistedFor(r.member, now); unlisted >= timeout {
				retire(pod, r.member, unlisted)
				continue
			}
			if fresh[r.member] {
				n.passOnRefs(ctx, refs, pod, r)
			}
			n.sendStatus(pod, n.statusFor(pod, r))
			continue
		}
		name := dispatchedTo(pod)
		n.mu.Lock()
		_, held := n.held[uid]
		n.mu.Unlock()
		if name == "" && held {
			// Held back for a Secret or ConfigMap it reads (CreatePod
			// said so, and virtual-kubelet does not retry): try again.
			// Waiting for one has no timeout, as kubelet waits; once it
			// has them and no provider takes it, the dispatch timeout
			// runs.
			err := n.CreatePod(ctx, pod)
			if err == nil {
				continue
			}
			klog.FromContext(ctx).V(2).Info("Dispatching a pod that was held back failed", "pod", klog.KObj(pod), "err", err)
		}
		if name == "" {
			// Not dispatched yet: the pod controller retries, until the
			// dispatch timeout.
			if waited := n.undispatchedFor(pod, now); waited >= n.cfg.DispatchTimeout() {
				n.fail(pod, ReasonDispatchTimeout, fmt.Sprintf("no provider started this pod in %s", waited.Round(time.Second)))
			}
			continue
		}
		m := n.member(name)
		if m == nil {
			n.fail(pod, ReasonProviderRemoved, fmt.Sprintf("provider %s is no longer configured", name))
			continue
		}
		switch unlisted := n.unlistedFor(m, now); {
		case unlisted >= timeout:
			retire(pod, m, unlisted)
		case fresh[m] && n.strike(uid) >= lostAfter:
			n.fail(pod, ReasonRemoteLost, fmt.Sprintf("its remote workload vanished from provider %s (%s)", name, remoteMessage(pod)))
		}
	}
	if len(gonePods) == 0 && n.budgets != nil {
		n.budgets.Idle()
	}
	n.mu.Lock()
	for _, m := range n.members {
		metrics.GoneProviderWaiting.WithLabelValues(m.Config.Name).Set(float64(goneWaiting[m]))
		if unlisted := n.unlistedForLocked(m, now); unlisted >= timeout && !m.goneSaid {
			m.goneSaid = true
			n.announceGone(m, unlisted, gonePods[m])
		}
	}
	for uid := range n.retiring {
		if pod, ok := byUID[uid]; !ok || pod.DeletionTimestamp != nil || terminal(pod) {
			delete(n.retiring, uid)
		}
	}
	for uid := range n.lost {
		if _, ok := byUID[uid]; !ok {
			delete(n.lost, uid)
		}
	}
	for uid := range n.waiting {
		if pod, ok := byUID[uid]; !ok || dispatchedTo(pod) != "" || terminal(pod) {
			delete(n.waiting, uid)
		}
	}
	for uid := range n.refsSent {
		if _, ok := byUID[uid]; !ok {
			delete(n.refsSent, uid)
		}
	}
	for uid, since := range n.held {
		// A pod held since this reconcile listed the pods is not in
		// byUID yet: keep it (virtual-kubelet will not call again).
		if pod, ok := byUID[uid]; (!ok && since.Before(now)) || (ok && terminal(pod)) {
			delete(n.held, uid)
		}
	}
	n.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Pods synced", "pods", len(byUID), "workloads", len(index))
}

// passOnRefs gives a running pod's provider the Secrets and ConfigMaps it
// reads when they changed since it was last given them (or this process
// has not given them yet). A Secret deleted since is not passed on: the
// remote side keeps the copy it runs with, as a running pod keeps its
// environment.
func (n *Node) passOnRefs(ctx context.Context, reader *refReader, pod *v1.Pod, r *remote) {
	if len(provider.RefsOf(pod)) == 0 {
		return
	}
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
	defer cancel()
	refs, fingerprint, err := reader.read(callCtx, pod)
	if err != nil {
		logger.V(2).Info("Not passing on the pod's Secrets and ConfigMaps", "err", err)
		return
	}
	n.mu.Lock()
	sent := n.refsSent[pod.UID]
	n.mu.Unlock()
	if sent == fingerprint {
		return
	}
	if err := r.member.Provider.UpdateRefs(callCtx, r.w.ID, pod, refs); err != nil {
		logger.Info("Passing on the pod's Secrets and ConfigMaps failed", "provider", r.member.Config.Name, "err", err)
		return
	}
	n.mu.Lock()
	n.refsSent[pod.UID] = fingerprint
	n.mu.Unlock()
	logger.V(2).Info("Passed on the pod's Secrets and ConfigMaps", "provider", r.member.Config.Name, "objects", fingerprint)
}

// undispatchedFor is how long pod has waited for a provider since this
// process first saw it undispatched (a restarted process gives it a new
// dispatch timeout rather than trust a clock it did not keep).
func (n *Node) undispatchedFor(pod *v1.Pod, now time.Time) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.workloads[pod.UID] != nil {
		return 0 // dispatched since this reconcile listed the providers
	}
	since, ok := n.waiting[pod.UID]
	if !ok {
		since = now
		n.waiting[pod.UID] = since
	}
	return now.Sub(since)
}

func (n *Node) strike(uid types.UID) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lost[uid]++
	return n.lost[uid]
}

func (n *Node) clearLost(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.lost, uid)
}

// syncNode sends the node's status when its capacity or conditions change.
func (n *Node) syncNode() {
	n.mu.Lock()
	status := n.nodeStatusLocked(n.lastNode)
	published, _ := n.offerLocked().Encode()
	cb := n.notifyNode
	changed := nodeStatusChanged(n.lastNode, &status) || published != n.lastOffer
	if cb != nil && changed {
		n.lastNode, n.lastOffer = &status, published
	}
	n.mu.Unlock()
	if cb == nil || !changed {
		return
	}
	node := n.NodeObject()
	node.Status = status
	klog.Background().V(2).Info("Node status changed", "node", node.Name, "allocatable", status.Allocatable, "ready", status.Conditions[0].Status, "message", status.Conditions[0].Message)
	cb(node)
}

// observeStart records how long a workload this process created took to
// serve at its provider (the image pulled and the model loaded) when a
// listing first finds it Ready (once: a later Ready after a restart of its
// container is not a start).
func observeStart(old, cur *remote, kind string, now time.Time) {
	cur.started = old.started
	if cur.started || cur.created.IsZero() || (old.w.Phase == provider.Running && old.w.Ready) || cur.w.Phase != provider.Running || !cur.w.Ready {
		return
	}
	cur.started = true
	metrics.RemoteStart.WithLabelValues(cur.member.Config.Name, kind).Observe(now.Sub(cur.created).Seconds())
}

// meter counts the GPU-seconds each provider ran since the last call, and
// their cost at its price: the GPUs of the pods and warm instances running
// there (by their requests; a warm instance's are its victim's, learnt
// from the claims) times the time since then.
func (n *Node) meter(now time.Time) {
	byUID := n.podsByUID()
	gpu := v1.ResourceName(n.cfg.GPUResourceName)
	n.mu.Lock()
	last := n.metered
	n.metered = now
	gpus := map[*Member]int64{}
	for uid, r := range n.workloads {
		pod := byUID[uid]
		if pod == nil || terminal(pod) || r.w.Phase != provider.Running {
			continue
		}
		q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[gpu]
		gpus[r.member] += q.Value()
	}
	// Warm instances run, and bill, before any pod here adopts them: at
	// their victim's requests.
	for _, r := range n.warm {
		if r.w.Phase == provider.Running {
			q := r.requests[gpu]
			gpus[r.member] += q.Value()
		}
	}
	n.mu.Unlock()
	if last.IsZero() || !now.After(last) {
		return
	}
	elapsed := now.Sub(last).Seconds()
	for m, g := range gpus {
		if g == 0 {
			continue
		}
		seconds := float64(g) * elapsed
		metrics.OverflowGPUSeconds.WithLabelValues(m.Config.Name).Add(seconds)
		metrics.OverflowCost.WithLabelValues(m.Config.Name).Add(seconds / 3600 * m.Config.PricePerGPUHour)
	}
}

// recordWorkloads exports the remote workloads by provider and state.
func (n *Node) recordWorkloads() {
	n.mu.Lock()
	defer n.mu.Unlock()
	counts := map[string]map[string]int{}
	for _, m := range n.members {
		counts[m.Config.Name] = map[string]int{"pending": 0, "running": 0, "ready": 0, "succeeded": 0, "failed": 0}
	}
	for _, r := range n.workloads {
		state := strings.ToLower(string(r.w.Phase))
		if r.w.Phase == provider.Running && r.w.Ready {
			state = "ready"
		}
		counts[r.member.Config.Name][state]++
	}
	for name, byState := range counts {
		for state, c := range byState {
			metrics.RemoteWorkloads.WithLabelValues(name, state).Set(float64(c))
		}
	}
}

// applyQuota caps each reported resource at its quota; a quota on a
// resource the provider does not report is the capacity.
func applyQuota(reported, quota v1.ResourceList) v1.ResourceList {
	out := reported.DeepCopy()
	for name, q := range quota {
		if r, ok := out[name]; !ok || r.Cmp(q) > 0 {
			out[name] = q.DeepCopy()
		}
	}
	for name, q := range out {
		if q.Sign() < 0 {
			out[name] = resource.Quantity{}
		}
	}
	return out
}

// remoteMessage is the pod's RemoteCondition message ("runs as <id> at
// provider <name>").
func remoteMessage(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == RemoteCondition {
			return c.Message
		}
	}
	return ""
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
