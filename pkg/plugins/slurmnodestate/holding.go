// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmnodestate

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// holdStateKey holds the id of the placeholder job PreBind got running.
const holdStateKey fwk.StateKey = "Hold" + Name

type holdState struct{ job string }

// Clone returns the state: it is not changed once written.
func (s *holdState) Clone() fwk.StateData { return s }

func heldJob(state fwk.CycleState) string {
	data, err := state.Read(holdStateKey)
	if err != nil {
		return ""
	}
	return data.(*holdState).job
}

// Reserve does nothing: GPUs are held in Slurm at PreBind, off the
// scheduling cycle, as Slurm takes a scheduler tick or more to run a job.
// The plugin is a ReservePlugin for Unreserve.
func (pl *SlurmNodeState) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve cancels the placeholder job of a pod that was not bound after
// all.
func (pl *SlurmNodeState) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if id := heldJob(state); id != "" {
		klog.FromContext(ctx).V(2).Info("Pod not bound; cancelling its placeholder job", "pod", klog.KObj(pod), "node", nodeName, "job", id)
		pl.holder.Release(id)
	}
}

// PreBindPreFlight says whether PreBind holds GPUs in Slurm for the pod: a
// pod that needs GPUs on a node shared with slurmd, when placeholder jobs
// are on.
func (pl *SlurmNodeState) PreBindPreFlight(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if pl.holder == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if node := pl.node(nodeName); node == nil || pl.holder.Needs(pod, node) == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// PreBind holds the pod's GPUs in Slurm: a placeholder job on the node,
// waited on until it runs. When Slurm does not run it, the pod is not
// bound there: the status (Unschedulable) becomes its FailedScheduling
// Event, the node is avoided for the pod for a while, and the pod is
// retried.
func (pl *SlurmNodeState) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	node := pl.node(nodeName)
	if pl.holder == nil || node == nil {
		return nil
	}
	gpus := pl.holder.Needs(pod, node)
	if gpus == 0 {
		return nil
	}
	hold, err := pl.holder.Hold(ctx, pod, node, gpus)
	if err != nil {
		pl.rejected.Add(pod)
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	state.Write(holdStateKey, &holdState{job: hold.JobID})
	return nil
}

// node reads a node from the scheduler's snapshot.
func (pl *SlurmNodeState) node(name string) *v1.Node {
	ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil || ni.Node() == nil {
		return nil
	}
	return ni.Node()
}
