// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package capacity

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// External is what Kubernetes does not see about a node, as another part of
// the scheduler knows it: the runtime's Slurm view knows which nodes Slurm
// drained and how many GPUs Slurm jobs hold.
type External interface {
	// NodeExternal reports whether pods may use the node at all, and the
	// resources held outside Kubernetes.
	NodeExternal(node *v1.Node) (usable bool, held map[v1.ResourceName]int64)
	// Generation changes whenever NodeExternal's answer for an unchanged
	// node may have changed, so callers can cache answers under it.
	Generation() uint64
}

// SlotsWith is Slots with what ext knows taken into account: 0 on nodes ext
// calls unusable, and ext's held resources subtracted (ext may be nil).
func (s Shape) SlotsWith(ni fwk.NodeInfo, ext External) int {
	if ext == nil {
		return s.Slots(ni, nil)
	}
	usable, held := ext.NodeExternal(ni.Node())
	if !usable {
		return 0
	}
	return s.Slots(ni, held)
}
