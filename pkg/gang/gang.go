// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package gang knows what a gang is in both APIs sluice serves: native
// PodGroups (scheduling.k8s.io/v1beta1, pods with spec.schedulingGroup) and
// scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1, pods with the
// label scheduling.x-k8s.io/pod-group). It identifies a pod's gang, reads
// the per-gang fabric request, and lists label-gang members and PodGroups.
package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// Annotations on a PodGroup (of either API) that shape its placement.
const (
	// FabricLevelAnnotation is the fabric level the gang must or should
	// fit in: a configured level name (leaf, spine, block) or "any".
	FabricLevelAnnotation = "sluice.dev/fabric-level"
	// FabricModeAnnotation is "required" or "preferred".
	FabricModeAnnotation = "sluice.dev/fabric-mode"
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

// FabricRequest is where a gang asks to be placed.
type FabricRequest struct {
	// Level is a configured level name or "any".
	Level string
	// Mode says whether Level is a requirement.
	Mode config.FabricMode
}

// ParseFabricRequest reads a PodGroup's fabric annotations, falling back to
// the defaults. Annotation values are lower case ("required", "preferred");
// the error names the annotation and the bad value.
func ParseFabricRequest(annotations map[string]string, fabric *config.FabricConfig, defaults FabricRequest) (FabricRequest, error) {
	req := defaults
	if v, ok := annotations[FabricLevelAnnotation]; ok {
		if errs := validation.ValidateFabricLevelName(field.NewPath("metadata", "annotations").Key(FabricLevelAnnotation), fabric, v); len(errs) > 0 {
			return req, errs.ToAggregate()
		}
		req.Level = v
	}
	if v, ok := annotations[FabricModeAnnotation]; ok {
		switch v {
		case "required":
			req.Mode = config.FabricModeRequired
		case "preferred":
			req.Mode = config.FabricModePreferred
		default:
			return req, field.NotSupported(field.NewPath("metadata", "annotations").Key(FabricModeAnnotation), v, []string{"required", "preferred"})
		}
	}
	return req, nil
}
