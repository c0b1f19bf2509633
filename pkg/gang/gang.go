// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package gang knows what a gang is in both APIs sluice serves: native
// PodGroups (scheduling.k8s.io/v1beta1, pods with spec.schedulingGroup) and
// scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1, pods with the
// label scheduling.x-k8s.io/pod-group). It identifies a pod's gang, reads
// the gang's PodGroup (quorum, timeout, where it asks to be placed) and its
// members (placed and pending), and reports on gangs (Events, PodGroup
// conditions). Every plugin reads gangs through it, so all agree.
package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// API says which PodGroup API a gang uses.
type API string

const (
	// Native is scheduling.k8s.io/v1beta1 PodGroups.
	Native API = "scheduling.k8s.io/v1beta1"
	// Label is scheduling.x-k8s.io/v1alpha1 PodGroups.
	Label API = "scheduling.x-k8s.io/v1alpha1"
)

// Key identifies a gang.
type Key struct {
	API       API
	Namespace string
	Name      string
}

func (k Key) String() string { return fmt.Sprintf("%s/%s (%s)", k.Namespace, k.Name, k.API) }

// KeyOf returns the gang a pod belongs to. A pod that names a native
// PodGroup belongs to it even if it also carries the label.
func KeyOf(pod *v1.Pod) (Key, bool) {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return Key{API: Native, Namespace: pod.Namespace, Name: *g.PodGroupName}, true
	}
	if name, ok := pod.Labels[v1alpha1.PodGroupLabel]; ok && name != "" {
		return Key{API: Label, Namespace: pod.Namespace, Name: name}, true
	}
	return Key{}, false
}
