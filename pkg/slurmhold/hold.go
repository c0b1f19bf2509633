// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurmhold makes Slurm and Kubernetes one GPU pool on nodes where
// a native slurmd runs beside kubelet: before a pod that needs GPUs is
// bound to such a node, sluice holds its GPUs in Slurm with a placeholder
// job pinned to the node (name sluice-<pod UID>), waits until Slurm runs
// it, records the GPU indices Slurm gave it on the pod and then binds.
// Slurm jobs then see the pod's GPUs as used, as pods see Slurm jobs'
// (pkg/slurm.View.HeldGPUs, which does not count the placeholders twice).
// If Slurm cannot give the GPUs in time, the pod is not bound there. A
// leader-only sweep cancels placeholder jobs whose pods are gone and
// reports pods whose job vanished.
//
// Example: pod ml/train-0 asks for 4 GPUs and is placed on gpu03. sluice
// runs `sbatch -w gpu03 --gres=gpu:4 -J sluice-<uid>` (or POSTs the same to
// slurmrestd), Slurm runs it with GRES gpu:4(IDX:0-3), the pod gets
// sluice.dev/slurm-job=<id> and sluice.dev/slurm-gpus=0-3 and is bound; an
// `sbatch --gres=gpu:8 -w gpu03` now waits. Deleting the pod cancels the
// job.
package slurmhold

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/slurm"
)

// Annotations sluice writes on a pod whose GPUs a placeholder job holds.
const (
	// AnnotationJob is the placeholder job's id.
	AnnotationJob = "sluice.dev/slurm-job"
	// AnnotationGPUs are the GPU indices Slurm gave the job ("0-3").
	AnnotationGPUs = "sluice.dev/slurm-gpus"
	// AnnotationNode is the Kubernetes node the job holds GPUs on.
	AnnotationNode = "sluice.dev/slurm-node"
)

// JobPrefix starts every placeholder job's name; the pod's UID follows.
const JobPrefix = "sluice-"

// Event reasons on pods.
const (
	// ReasonHeld: the placeholder job runs; the pod is bound next.
	ReasonHeld = "SlurmPlaceholderRunning"
	// ReasonRefused: Slurm did not run the placeholder job (busy, down,
	// slurmrestd failing); the pod is not bound to that node. It is the
	// prefix of the pod's FailedScheduling message too.
	ReasonRefused = "SlurmPlaceholderRefused"
	// ReasonLost: the job holding a running pod's GPUs is gone.
	ReasonLost = "SlurmPlaceholderLost"
)

// refusedFor is how long a node whose Slurm did not run a pod's
// placeholder is avoided for that pod: Slurm may keep the GPUs for a
// pending job of higher priority although they look free, and the pod
// should try elsewhere meanwhile.
const refusedFor = 2 * time.Minute

// Config is what a Holder needs.
type Config struct {
	// Jobs submits, reads and cancels the placeholder jobs.
	Jobs slurm.JobWriter
	// View is the scheduler's Slurm view.
	View *slurm.View
	// Pods is the scheduler's pod informer (it does not list ended pods).
	Pods coreinformers.PodInformer
	// Client patches pods.
	Client kubernetes.Interface
	// Recorder records Events on pods.
	Recorder events.EventRecorder
	// Timeout bounds the wait for a job to run; Resync is the time
	// between sweeps.
	Timeout, Resync time.Duration
	// Partition the jobs go to (empty: Slurm's default).
	Partition string
	// PollEvery is how often a job is read while waiting for it (250 ms
	// when zero).
	PollEvery time.Duration
	// Nodes reads Kubernetes nodes: a bound pod's node names the Slurm
	// node its job runs on.
	Nodes corelisters.NodeLister
	// Owner is this sluice's identity in Slurm (its cluster's id): each
	// placeholder's comment starts with OwnerPrefix, Owner and a colon,
	// and the sweep touches no job without it. Required.
	Owner string
	// User is the Slurm user placeholders are submitted as, when known:
	// the sweep touches no other user's job.
	User string
}

// OwnerPrefix starts a placeholder job's comment; the owner follows.
const OwnerPrefix = "sluice-cluster="

// Holder holds pods' GPUs in Slurm.
type Holder struct {
	cfg     Config
	indexer cache.Indexer

	mu sync.Mutex
	// refused: per pod, the nodes whose Slurm did not run its placeholder,
	// why, and until when they are avoided.
	refused map[types.UID]map[string]refusal
	// inFlight are jobs held for pods not bound yet (by this scheduler).
	inFlight map[string]bool
	// unclaimed: jobs no bound pod claims, since when (the sweep cancels
	// them after a grace period).
	unclaimed map[string]time.Time
	// reported: pod UID and job of pods already reported lost.
	reported map[string]bool
	// held: which placeholder job holds which pod's GPUs, on which
	// Kubernetes node, as Slurm says (each sweep's list, and each job this
	// scheduler started since): never the pod's annotations, which its
	// tenant may edit.
	held map[types.UID]holding
	kick chan struct{}
}

// holding is a placeholder job holding a pod's GPUs on a node, and since
// when this scheduler knows.
type holding struct {
	job, node string
	since     time.Time
}

// uidIndex indexes the pod informer by UID.
const uidIndex = "sluice.dev/uid"

// New builds a Holder and indexes the pod informer by UID and by the node
// whose GPUs a placeholder holds, and tells the view how many GPUs
// placeholders hold on each node (so they are not counted twice).
func New(cfg Config) (*Holder, error) {
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 250 * time.Millisecond
	}
	if cfg.Owner == "" || cfg.Nodes == nil {
		return nil, fmt.Errorf("placeholder jobs need an owner (the cluster's id) and the node lister")
	}
	inf := cfg.Pods.Informer()
	if err := inf.AddIndexers(cache.Indexers{
		uidIndex: func(obj any) ([]string, error) {
			if p, ok := obj.(*v1.Pod); ok {
				return []string{string(p.UID)}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, err
	}
	h := &Holder{cfg: cfg, indexer: inf.GetIndexer(), refused: map[types.UID]map[string]refusal{},
		inFlight: map[string]bool{}, unclaimed: map[string]time.Time{}, reported: map[string]bool{},
		held: map[types.UID]holding{}, kick: make(chan struct{}, 1)}
	cfg.View.SetPlaceholders(h.HeldGPUs)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Pod)
			n, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && o.Spec.NodeName != n.Spec.NodeName && h.holds(n.UID) {
				cfg.View.Invalidate() // bound: its placeholder is its own request now
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*v1.Pod); ok && h.holds(p.UID) {
				cfg.View.Invalidate()
				h.Kick()
			}
		},
	}); err != nil {
		return nil, err
	}
	return h, nil
}

// holds reports whether a placeholder job holds the pod's GPUs.
func (h *Holder) holds(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.held[uid]
	return ok
}

// HeldOn is the node whose GPUs a placeholder holds for a pod bound
// there, or "".
func (h *Holder) HeldOn(p *v1.Pod) string {
	h.mu.Lock()
	hd, ok := h.held[p.UID]
	h.mu.Unlock()
	if !ok || p.Spec.NodeName == "" || hd.node != p.Spec.NodeName {
		return ""
	}
	return hd.node
}

// HeldGPUs is how many GPUs placeholder jobs hold for pods bound to a
// node.
func (h *Holder) HeldGPUs(nodeName string) int64 {
	h.mu.Lock()
	var uids []types.UID
	for uid, hd := range h.held {
		if hd.node == nodeName {
			uids = append(uids, uid)
		}
	}
	h.mu.Unlock()
	gpu := h.cfg.View.Config().GPUResource
	var n int64
	for _, uid := range uids {
		if p := h.podByUID(string(uid)); p != nil && p.Spec.NodeName == nodeName {
			n += capacity.ShapeOf(p).Scalar[gpu]
		}
	}
	return n
}

// setHeld records that job holds the pod's GPUs on node (job "": holds
// nothing any more), and has the view count anew.
func (h *Holder) setHeld(uid types.UID, job, node string) {
	h.mu.Lock()
	if job == "" {
		delete(h.held, uid)
	} else {
		h.held[uid] = holding{job: job, node: node, since: time.Now()}
	}
	h.mu.Unlock()
	h.cfg.View.Invalidate()
}

// Needs is how many GPUs the pod must hold in Slurm before it is bound to
// node: its GPU request on a node labelled as shared with slurmd, 0
// otherwise.
func (h *Holder) Needs(pod *v1.Pod, node *v1.Node) int64 {
	cfg := h.cfg.View.Config()
	if node == nil || cfg.SharedNodeLabel == "" || node.Labels[cfg.SharedNodeLabel] != "true" {
		return 0
	}
	// Slurm decides, even when its snapshot is stale or missing: a job
	// on a node Slurm does not know, or while it is down, does not run.
	return capacity.ShapeOf(pod).Scalar[cfg.GPUResource]
}

// refusal is why Slurm did not run a pod's placeholder on a node, and
// until when the node is avoided for the pod.
type refusal struct {
	why   string
	until time.Time
}

func (h *Holder) refuse(pod *v1.Pod, nodeName string, why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused[pod.UID] == nil {
		h.refused[pod.UID] = map[string]refusal{}
	}
	h.refused[pod.UID][nodeName] = refusal{why: truncate(why.Error(), maxRefusalCause), until: time.Now().Add(refusedFor)}
}

// maxRefusalCause bounds the cause a rejection repeats per node (sbatch's
// stderr or slurmrestd's error list can be long).
const maxRefusalCause = 256

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Hold is a placeholder job that runs for a pod, and the GPU indices Slurm
// gave it.
type Hold struct {
	JobID, Indexes string
}

// Hold submits the pod's placeholder job for gpus GPUs on node, waits until
// it runs, and records it on the pod. On any failure the job is cancelled,
// the node is avoided for the pod for a while, and the error says why.
func (h *Holder) Hold(ctx context.Context, pod *v1.Pod, node *v1.Node, gpus int64) (*Hold, error) {
	logger := klog.FromContext(ctx)
	slurmName := h.cfg.View.SlurmName(node)
	start := time.Now()
	fail := func(result string, err error) (*Hold, error) {
		metrics.SlurmPlaceholderWait.WithLabelValues(result).Observe(time.Since(start).Seconds())
		h.refuse(pod, node.Name, err)
		return nil, fmt.Errorf("%s: %w", ReasonRefused, err)
	}
	id, err := h.cfg.Jobs.SubmitPlaceholder(ctx, slurm.Placeholder{
		Name: JobPrefix + string(pod.UID), Comment: fmt.Sprintf("%s%s: GPUs of pod %s/%s", OwnerPrefix, h.cfg.Owner, pod.Namespace, pod.Name),
		Node: slurmName, Partition: h.cfg.Partition, GRES: h.cfg.View.Config().GRESName, GPUs: gpus,
	})
	if err != nil {
		return fail("error", fmt.Errorf("submitting a placeholder job for %d GPUs on %s: %w", gpus, slurmName, err))
	}
	h.setInFlight(id, true)
	job, err := h.waitRunning(ctx, id)
	if err == nil && job.Nodes != slurmName {
		err = fmt.Errorf("it runs on %q, not %s", job.Nodes, slurmName)
	}
	if err != nil {
		h.release(id, "unbound")
		result := "error"
		if job != nil && !job.Ended() {
			result = "timeout"
		} else if job != nil {
			result = "refused"
		}
		return fail(result, fmt.Errorf("placeholder job %s (%d GPUs on %s) did not run: %w", id, gpus, slurmName, err))
	}
	metrics.SlurmPlaceholderWait.WithLabelValues("running").Observe(time.Since(start).Seconds())
	hold := &Hold{JobID: id, Indexes: job.Indexes(h.cfg.View.Config().GRESName)}
	// Read Slurm now, so the snapshot has the job before the pod is bound
	// (best effort: a stale snapshot only counts the GPUs twice for a
	// poll interval).
	if err := h.cfg.View.Refresh(ctx); err != nil {
		logger.V(2).Info("Reading Slurm after a placeholder started failed", "err", err)
	}
	h.setHeld(pod.UID, id, node.Name)
	// The annotations tell people; sluice reads which job holds which pod
	// from Slurm.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		AnnotationJob: id, AnnotationGPUs: hold.Indexes, AnnotationNode: node.Name,
	}}})
	if _, err := h.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		h.setHeld(pod.UID, "", "")
		h.release(id, "unbound")
		return fail("error", fmt.Errorf("recording placeholder job %s on the pod: %w", id, err))
	}
	if h.cfg.Recorder != nil {
		h.cfg.Recorder.Eventf(pod, nil, v1.EventTypeNormal, ReasonHeld, "Binding",
			"Slurm job %s holds %d GPUs (indices %s) on %s for this pod", id, gpus, orNone(hold.Indexes), slurmName)
	}
	logger.V(2).Info("Placeholder job runs", "pod", klog.KObj(pod), "job", id, "node", slurmName, "gpus", gpus, "indexes", hold.Indexes, "wait", time.Since(start))
	return hold, nil
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// waitRunning reads the job until it runs, ends, or the timeout passes.
func (h *Holder) waitRunning(ctx context.Context, id string) (*slurm.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	var last *slurm.Job
	var lastErr error
	for {
		job, err := h.cfg.Jobs.Job(ctx, id)
		switch {
		case err != nil:
			lastErr = err
		case job == nil:
			return nil, fmt.Errorf("slurmctld no longer knows it")
		case job.Running():
			return job, nil
		case job.Ended():
			return job, fmt.Errorf("it ended (%s, reason %s)", job.State, job.Reason)
		default:
			last = job
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return last, fmt.Errorf("still %s (reason %s) after %s", last.State, last.Reason, h.cfg.Timeout)
			}
			return nil, fmt.Errorf("not running after %s: %v", h.cfg.Timeout, lastErr)
		case <-time.After(h.cfg.PollEvery):
		}
	}
}

// Bound says the pod holding job is bound: the sweep keeps the job for as
// long as the pod runs.
func (h *Holder) Bound(jobID string) { h.setInFlight(jobID, false) }

// Release cancels a job held for a pod that was not bound after all.
func (h *Holder) Release(jobID string) { h.release(jobID, "unbound") }

func (h *Holder) setInFlight(id string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.inFlight[id] = true
	} else {
		delete(h.inFlight, id)
	}
}

// release cancels a job (with its own deadline: the caller's context may be
// what ended) and counts why.
func (h *Holder) release(id, why string) {
	h.setInFlight(id, false)
	h.mu.Lock()
	for uid, hd := range h.held {
		if hd.job == id {
			delete(h.held, uid)
		}
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.cfg.Jobs.CancelJob(ctx, id); err != nil {
		// The sweep cancels it later: no pod claims it.
		klog.Background().Error(err, "Cancelling a placeholder job failed; the sweep retries", "job", id, "why", why)
		return
	}
	metrics.SlurmPlaceholderCancels.WithLabelValues(why).Inc()
}

// RefusedNodes are the nodes whose Slurm recently did not run the pod's
// placeholder job, sorted.
func (h *Holder) RefusedNodes(pod *v1.Pod) []string {
	return slices.Sorted(maps.Keys(h.Refused(pod)))
}

// Refused maps the nodes whose Slurm recently did not run the pod's
// placeholder job to why not (the error of the last attempt), so a
// rejection names the cause even when the scheduler's Event for the
// failed attempt is folded into a later one.
func (h *Holder) Refused(pod *v1.Pod) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]string
	now := time.Now()
	for node, r := range h.refused[pod.UID] {
		if now.Before(r.until) {
			if out == nil {
				out = map[string]string{}
			}
			out[node] = r.why
		}
	}
	return out
}
