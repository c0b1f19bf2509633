// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurmnodestate

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/slurm"
	"github.com/sluice-sched/sluice/pkg/slurmhold"
)

// preFilterStateKey holds the cycle's view of Slurm.
const preFilterStateKey fwk.StateKey = "PreFilter" + Name

type preFilterState struct {
	slurm.Reading
	gpus int64 // the pod's GPU request
	// refused maps the nodes whose Slurm recently did not run the pod's
	// placeholder job to why not.
	refused map[string]string
}

// Clone returns the state: it is not changed after PreFilter.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter reads the snapshot once per cycle, so every node of the cycle
// is judged against the same Slurm state.
func (pl *SlurmNodeState) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if pl.view == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	r := pl.view.Read(klog.FromContext(ctx))
	if r.Snap == nil && !r.Stale {
		// Failing open with nothing to read.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &preFilterState{Reading: r, gpus: capacity.ShapeOf(pod).Scalar[pl.view.Config().GPUResource]}
	if s.gpus > 0 && pl.holder != nil {
		s.refused = pl.holder.Refused(pod)
	}
	state.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions returns nil: other pods do not change Slurm's state.
func (pl *SlurmNodeState) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter rejects, as UnschedulableAndUnresolvable (no preemption frees a
// drained node), nodes whose Slurm node is in an unhealthy state or whose
// state is too old to trust (failing closed); on nodes shared with a
// native slurmd it rejects, as Unschedulable, pods that need GPUs Slurm
// jobs hold.
func (pl *SlurmNodeState) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(preFilterStateKey)
	if err != nil {
		return nil
	}
	s := data.(*preFilterState)
	node := nodeInfo.Node()
	if s.Stale && pl.view.Managed(s.Reading, node) {
		metrics.SlurmRejections.WithLabelValues(pl.profile, "stale").Inc()
		pl.rejected.Add(pod)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: failing closed: %s", ReasonStale, s.Why))
	}
	if s.Snap == nil {
		return nil
	}
	name := pl.view.SlurmName(node)
	n, ok := s.Snap.Nodes[name]
	if !ok {
		if pl.view.Labelled(node) {
			// Slurm's node, by its label, that Slurm's answer lacks: its
			// state is unknown, so it is not used.
			metrics.SlurmRejections.WithLabelValues(pl.profile, "unlisted").Inc()
			pl.rejected.Add(pod)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: the node is labelled as Slurm's, and Slurm does not list %s", ReasonUnlisted, name))
		}
		return nil
	}
	if bad := pl.view.Unhealthy(n); bad != "" {
		metrics.SlurmRejections.WithLabelValues(pl.profile, "state").Inc()
		pl.rejected.Add(pod)
		msg := fmt.Sprintf("%s: Slurm node %s is %s", ReasonUnhealthy, name, n.StateString())
		if n.Reason != "" {
			msg += fmt.Sprintf(" (reason: %q)", n.Reason)
		}
		klog.FromContext(ctx).V(5).Info("Node rejected by Slurm state", "pod", klog.KObj(pod), "node", node.Name, "slurmNode", name, "state", n.StateString(), "reason", n.Reason)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if why, ok := s.refused[node.Name]; ok {
		pl.rejected.Add(pod)
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: Slurm did not run this pod's placeholder job on %s recently (%s); trying other nodes", slurmhold.ReasonRefused, name, why))
	}
	if s.gpus > 0 {
		if held := pl.view.HeldGPUs(node, n); held > 0 {
			gpu := pl.view.Config().GPUResource
			free := capacity.Free(nodeInfo, gpu, held)
			if s.gpus > free {
				metrics.SlurmRejections.WithLabelValues(pl.profile, "gpus_held").Inc()
				pl.rejected.Add(pod)
				alloc := nodeInfo.GetAllocatable().GetScalarResources()[gpu]
				return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: Slurm jobs hold %d of %d %s on %s; %d free for pods, the pod needs %d",
					ReasonGPUsHeld, held, alloc, gpu, node.Name, free, s.gpus))
			}
		}
	}
	return nil
}

// PreScore skips scoring when there is no Slurm state to score by.
func (pl *SlurmNodeState) PreScore(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(preFilterStateKey)
	if err != nil || data.(*preFilterState).Snap == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score prefers nodes where Slurm runs nothing, so research pods (slurmd
// workers, training gangs) land where they disturb no Slurm job:
//
//	not a Slurm node, or IDLE:           100
//	MIXED, 6 of 8 GPUs in Slurm jobs:    100 * (8-6)/8 = 25
//	ALLOCATED:                           0
func (pl *SlurmNodeState) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(preFilterStateKey)
	if err != nil {
		return 0, nil
	}
	s := data.(*preFilterState)
	n, ok := s.Snap.Nodes[pl.view.SlurmName(nodeInfo.Node())]
	switch {
	case !ok || n.State == "IDLE":
		return fwk.MaxScore, nil
	case n.State == "ALLOCATED":
		return 0, nil
	}
	total, used := n.GPUs(pl.view.Config().GRESName)
	if total == 0 {
		return fwk.MaxScore / 2, nil
	}
	return fwk.MaxScore * max(total-used, 0) / total, nil
}

// ScoreExtensions returns nil: scores are already in [0, 100].
func (pl *SlurmNodeState) ScoreExtensions() fwk.ScoreExtensions { return nil }
