// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurmnodestate is the SlurmNodeState plugin: it keeps pods off
// nodes that Slurm has drained, taken down, failed, or reserved for
// maintenance, and stops Kubernetes from handing out GPUs that Slurm jobs
// hold on nodes where slurmd runs beside kubelet. It reads only the
// scheduler runtime's Slurm view (pkg/slurm.View), an in-memory snapshot
// polled in the background: Slurm being slow or down never blocks a
// scheduling cycle.
package slurmnodestate

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/requeue"
	"github.com/sluice-sched/sluice/pkg/slurm"
	"github.com/sluice-sched/sluice/pkg/slurmhold"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "SlurmNodeState"

// Reasons in statuses and events, for users to grep.
const (
	// ReasonUnhealthy: Slurm has the node in an unhealthy state.
	ReasonUnhealthy = "SlurmNodeUnhealthy"
	// ReasonGPUsHeld: Slurm jobs hold the GPUs the pod needs.
	ReasonGPUsHeld = "SlurmGPUsHeld"
	// ReasonStale: Slurm's state is too old to trust (failing closed).
	ReasonStale = "SlurmStateStale"
	// ReasonUnlisted: the node is labelled as Slurm's, and Slurm's answer
	// does not list it (failing closed for that node).
	ReasonUnlisted = "SlurmNodeUnlisted"
	// ReasonIgnored: a pod was bound without Slurm's state, which was too
	// old to trust (failing open).
	ReasonIgnored = "SlurmStateIgnored"
)

// Runtime is what the plugin needs of the scheduler's sluice runtime.
type Runtime interface {
	Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error
	Seal() error
	// Slurm is the Slurm view, nil when Slurm is off.
	Slurm() *slurm.View
	// SlurmHolder holds pods' GPUs in Slurm on shared nodes, nil when
	// placeholder jobs are off.
	SlurmHolder() *slurmhold.Holder
}

// SlurmNodeState is the plugin.
type SlurmNodeState struct {
	rt       Runtime
	handle   fwk.Handle
	profile  string            // the metrics' profile label
	view     *slurm.View       // nil until sealed, and when Slurm is off
	holder   *slurmhold.Holder // nil until sealed, and when placeholders are off
	recorder events.EventRecorder
	// rejected are pods turned away for Slurm reasons, retried when the
	// view changes.
	rejected *requeue.Waiting
}

var (
	_ fwk.PreFilterPlugin   = &SlurmNodeState{}
	_ fwk.FilterPlugin      = &SlurmNodeState{}
	_ fwk.PreScorePlugin    = &SlurmNodeState{}
	_ fwk.ScorePlugin       = &SlurmNodeState{}
	_ fwk.EnqueueExtensions = &SlurmNodeState{}
	_ fwk.SignPlugin        = &SlurmNodeState{}
	_ fwk.PostBindPlugin    = &SlurmNodeState{}
	_ fwk.ReservePlugin     = &SlurmNodeState{}
	_ fwk.PreBindPlugin     = &SlurmNodeState{}
)

// New returns the plugin's factory over rt. Its args may state the Slurm
// connection (once in the whole configuration); without one stated
// anywhere the plugin is off and every extension point skips.
func New(rt Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.SlurmNodeStateArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type SlurmNodeStateArgs, got %T", obj)
		}
		path := validation.ArgsPath(h.ProfileName(), Name)
		if err := validation.ValidateSlurmNodeStateArgs(path, args); err != nil {
			return nil, err
		}
		if err := rt.Declare(ctx, h, path, config.Facts{Slurm: args.Slurm}); err != nil {
			return nil, err
		}
		return &SlurmNodeState{rt: rt, handle: h, profile: h.ProfileName(), recorder: h.EventRecorder(), rejected: requeue.NewWaiting(h)}, nil
	}
}

// Name returns the plugin name.
func (pl *SlurmNodeState) Name() string { return Name }

// EventsToRegister seals the runtime (every plugin is built by now) and
// takes its Slurm view. Besides the view's changes (which retry the pods
// it rejected), node changes can help: a new node, or a node label that
// maps a node to another Slurm node or marks it shared.
func (pl *SlurmNodeState) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := pl.rt.Seal(); err != nil {
		return nil, err
	}
	if pl.view == nil {
		pl.view = pl.rt.Slurm()
		if pl.view == nil {
			klog.FromContext(ctx).Info("SlurmNodeState is off: no slurmrestd endpoint configured", "profile", pl.handle.ProfileName())
		} else {
			logger := klog.FromContext(ctx)
			pl.view.OnChange(func() { pl.rejected.ActivateAll(logger, "Slurm's state changed") })
			pl.holder = pl.rt.SlurmHolder()
		}
	}
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isNodeRelevant},
	}, nil
}

// isNodeRelevant queues a pod when a node appears, or when a label the view
// reads (Slurm name, shared, managed) changes.
func (pl *SlurmNodeState) isNodeRelevant(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	cur, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, nil
	}
	old, ok := oldObj.(*v1.Node)
	if !ok || old == nil || pl.view == nil {
		return fwk.Queue, nil
	}
	cfg := pl.view.Config()
	for _, key := range []string{cfg.NodeNameLabel, cfg.SharedNodeLabel, cfg.ManagedNodeLabel} {
		if key != "" && old.Labels[key] != cur.Labels[key] {
			logger.V(5).Info("Slurm-relevant node label changed", "pod", klog.KObj(pod), "node", klog.KObj(cur), "label", key)
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// PostBind puts an Event on a pod bound while Slurm's state was too old to
// trust and the plugin failed open, so the pods placed without Slurm's
// view can be found (failing closed, the pods that could not be placed
// carry the reason in their FailedScheduling events instead).
func (pl *SlurmNodeState) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if pl.holder != nil {
		if h := heldJob(state); h != "" {
			pl.holder.Bound(h)
		}
	}
	if pl.view == nil || pl.recorder == nil || !pl.view.Config().FailOpen {
		return
	}
	if r := pl.view.Read(klog.FromContext(ctx)); r.Open {
		pl.recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonIgnored, "Binding",
			"bound to %s without Slurm's node state (failureMode Open): %s", nodeName, r.Why)
	}
}

// SignPod signs the pod's GPU request: Filter's answer for a node depends
// on it (GPUs held by Slurm), on the node, and on the nodes that refused
// the pod's placeholder job, nothing else of the pod.
func (pl *SlurmNodeState) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	var gpus int64
	if pl.view != nil {
		gpus = capacity.ShapeOf(pod).Scalar[pl.view.Config().GPUResource]
	}
	fragments := []fwk.SignFragment{{Key: "sluice.dev/SlurmNodeState.GPURequest()", Value: gpus}}
	if pl.holder != nil {
		// And on the nodes whose Slurm recently did not run the pod's
		// placeholder job.
		fragments = append(fragments, fwk.SignFragment{Key: "sluice.dev/SlurmNodeState.Refused()", Value: pl.holder.RefusedNodes(pod)})
	}
	return fragments, nil
}
