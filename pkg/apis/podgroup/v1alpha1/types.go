// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the scheduler-plugins scheduling group.
const GroupName = "scheduling.x-k8s.io"

// SchemeGroupVersion is the group version of PodGroup.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource is the PodGroup resource.
var Resource = SchemeGroupVersion.WithResource("podgroups")

// PodGroupLabel is the pod label naming the PodGroup (in the pod's
// namespace) that the pod is a member of.
const PodGroupLabel = GroupName + "/pod-group"

// PodGroupPhase is the phase of a pod group.
type PodGroupPhase string

// Phases, as scheduler-plugins defines them.
const (
	PodGroupPending    PodGroupPhase = "Pending"
	PodGroupScheduling PodGroupPhase = "Scheduling"
	PodGroupScheduled  PodGroupPhase = "Scheduled"
	PodGroupRunning    PodGroupPhase = "Running"
	PodGroupFinished   PodGroupPhase = "Finished"
	PodGroupFailed     PodGroupPhase = "Failed"
	PodGroupUnknown    PodGroupPhase = "Unknown"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PodGroup is a gang of pods scheduled all or nothing.
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodGroupSpec   `json:"spec,omitempty"`
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec is the desired gang.
type PodGroupSpec struct {
	// MinMember is the number of pods that must be placed together.
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources are the minimal resources of the gang.
	MinResources v1.ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds is how long placed members wait for the rest.
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is the observed gang.
type PodGroupStatus struct {
	Phase             PodGroupPhase `json:"phase,omitempty"`
	OccupiedBy        string        `json:"occupiedBy,omitempty"`
	Running           int32         `json:"running,omitempty"`
	Succeeded         int32         `json:"succeeded,omitempty"`
	Failed            int32         `json:"failed,omitempty"`
	ScheduleStartTime metav1.Time   `json:"scheduleStartTime,omitempty"`
	// Conditions is sluice's addition (see manifests/crds): why the gang is
	// or is not placed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PodGroupList is a list of PodGroups.
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
