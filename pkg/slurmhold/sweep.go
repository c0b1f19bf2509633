// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmhold

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/slurm"
)

// Kick asks for a sweep now (a pod holding a job ended).
func (h *Holder) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Run sweeps every Resync and whenever a pod holding a job ends, until ctx
// ends. It runs on the leader only.
func (h *Holder) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("slurm-placeholders")
	ctx = klog.NewContext(ctx, logger)
	ticker := time.NewTicker(h.cfg.Resync)
	defer ticker.Stop()
	for {
		if err := h.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Sweeping placeholder jobs failed; retrying at the next sweep")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-h.kick:
		}
	}
}

// Sweep lists the placeholder jobs once and cancels those whose pod is gone
// (deleted or ended), or that no bound pod claims after a grace period
// (left by a scheduler that died while binding); it reports, once, each
// running pod whose job is gone.
func (h *Holder) Sweep(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	// The pods holding a job before the list: a pod bound after it holds
	// a job the list may lack, and is not reported lost for it.
	listed := time.Now()
	before := h.heldPods()
	jobs, err := h.cfg.Jobs.Jobs(ctx, JobPrefix)
	if err != nil {
		return err
	}
	now := time.Now()
	held := map[types.UID]holding{}
	grace := h.cfg.Timeout + h.cfg.Resync
	live := map[string]bool{}
	type cancelling struct{ id, why string }
	var cancel []cancelling
	h.mu.Lock()
	for i := range jobs {
		j := &jobs[i]
		if j.Ended() {
			continue
		}
		// Live whoever submitted it (a pod held by a placeholder of an
		// earlier version is not lost); only this sluice's are touched.
		live[j.ID] = true
		if !h.ours(j) {
			continue
		}
		pod := h.podByUID(strings.TrimPrefix(j.Name, JobPrefix))
		switch {
		case pod == nil:
			// Deleted or ended (the scheduler's informer drops ended
			// pods).
			cancel = append(cancel, cancelling{j.ID, "pod_gone"})
		case h.runsFor(j, pod):
			delete(h.unclaimed, j.ID)
			held[pod.UID] = holding{job: j.ID, node: pod.Spec.NodeName, since: listed}
		case h.inFlight[j.ID]:
		default:
			since, seen := h.unclaimed[j.ID]
			if !seen {
				h.unclaimed[j.ID] = now
			} else if now.Sub(since) > grace {
				logger.Info("Cancelling a placeholder job no bound pod claims", "job", j.ID, "pod", klog.KObj(pod), "unclaimedFor", now.Sub(since).Round(time.Second))
				cancel = append(cancel, cancelling{j.ID, "orphan"})
			}
		}
	}
	for id := range h.unclaimed {
		if !live[id] {
			delete(h.unclaimed, id)
		}
	}
	// Slurm's word replaces what was held, but for jobs this scheduler
	// started since the list (or still binding): the next list has them.
	for uid, hd := range h.held {
		if _, ok := held[uid]; !ok && (hd.since.After(listed) || h.inFlight[hd.job]) {
			held[uid] = hd
		}
	}
	changed := !maps.Equal(held, h.held)
	h.held = held
	for uid, nodes := range h.refused {
		for node, r := range nodes {
			if now.After(r.until) {
				delete(nodes, node)
			}
		}
		if len(nodes) == 0 {
			delete(h.refused, uid)
		}
	}
	h.mu.Unlock()
	if changed {
		h.cfg.View.Invalidate()
	}

	var errs []string
	for _, c := range cancel {
		if err := h.cfg.Jobs.CancelJob(ctx, c.id); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		metrics.SlurmPlaceholderCancels.WithLabelValues(c.why).Inc()
		logger.V(2).Info("Cancelled placeholder job", "job", c.id, "why", c.why)
	}
	h.reportLost(before, live)
	if len(errs) > 0 {
		return fmt.Errorf("cancelling placeholder jobs: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ours reports whether this sluice submitted the job: its comment
// carries this sluice's owner, and its user is this sluice's (when
// known). No other job is cancelled, whatever its name.
func (h *Holder) ours(j *slurm.Job) bool {
	if !strings.HasPrefix(j.Comment, OwnerPrefix+h.cfg.Owner+":") {
		return false
	}
	return h.cfg.User == "" || j.User == h.cfg.User
}

// runsFor reports whether the job holds the pod's GPUs: the pod (named
// by the job, which Slurm keeps) is bound to the node the job runs on.
// The pod's annotations, which its tenant may edit, are not read.
func (h *Holder) runsFor(j *slurm.Job, pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" || j.Nodes == "" {
		return false
	}
	node, err := h.cfg.Nodes.Get(pod.Spec.NodeName)
	return err == nil && h.cfg.View.SlurmName(node) == j.Nodes
}

// heldPod is a bound pod and the job holding its GPUs.
type heldPod struct {
	pod *v1.Pod
	job string
}

// heldPods are the bound pods holding a job, by pod UID and job.
func (h *Holder) heldPods() map[string]heldPod {
	h.mu.Lock()
	held := maps.Clone(h.held)
	h.mu.Unlock()
	out := map[string]heldPod{}
	for uid, hd := range held {
		if pod := h.podByUID(string(uid)); pod != nil && pod.Spec.NodeName == hd.node {
			out[string(uid)+"/"+hd.job] = heldPod{pod: pod, job: hd.job}
		}
	}
	return out
}

// reportLost puts an Event on each pod that held a job before the list
// and whose job is not among the live ones, once per pod and job.
func (h *Holder) reportLost(before map[string]heldPod, live map[string]bool) {
	seen := map[string]bool{}
	for k, hp := range before {
		pod, id := hp.pod, hp.job
		seen[k] = true
		if live[id] || pod.DeletionTimestamp != nil {
			continue
		}
		h.mu.Lock()
		done := h.reported[k]
		h.reported[k] = true
		h.mu.Unlock()
		if done {
			continue
		}
		metrics.SlurmPlaceholdersLost.Inc()
		klog.Background().Info("A pod's placeholder job is gone", "pod", klog.KObj(pod), "job", id, "node", pod.Spec.NodeName)
		if h.cfg.Recorder != nil {
			h.cfg.Recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonLost, "Holding",
				"Slurm job %s, which held this pod's GPUs on %s, is gone: Slurm may give them to another job", id, pod.Spec.NodeName)
		}
	}
	h.mu.Lock()
	for k := range h.reported {
		if !seen[k] {
			delete(h.reported, k)
		}
	}
	h.mu.Unlock()
}

func (h *Holder) podByUID(uid string) *v1.Pod {
	objs, err := h.indexer.ByIndex(uidIndex, uid)
	if err != nil || len(objs) == 0 {
		return nil
	}
	return objs[0].(*v1.Pod)
}
