// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
)

// Annotations on a PodGroup (of either API) that shape its placement.
const (
	// FabricLevelAnnotation is the fabric level the gang must or should
	// fit in: a configured level name (leaf, spine, block) or "any".
	FabricLevelAnnotation = "sluice.dev/fabric-level"
	// FabricModeAnnotation is "required" or "preferred".
	FabricModeAnnotation = "sluice.dev/fabric-mode"
)

// FabricRequest is where a gang asks to be placed.
type FabricRequest struct {
	// Level is a configured level name or "any".
	Level string
	// Mode says whether Level is a requirement.
	Mode config.FabricMode
}

// ParseFabricRequest reads a PodGroup's fabric annotations, falling back to
// the fabric's defaults. Annotation values are lower case ("required",
// "preferred"); the error names the annotation and the bad value.
func ParseFabricRequest(annotations map[string]string, fabric *config.FabricConfig) (FabricRequest, error) {
	req := FabricRequest{Level: fabric.DefaultLevel, Mode: fabric.DefaultMode}
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

// NativeFabricRequest is where a native PodGroup asks to be placed: its
// spec.schedulingConstraints.topology, when set, requires the fabric level
// whose node label is the constraint's key (upstream's meaning: all pods
// in one domain of that label); otherwise its sluice.dev/ annotations, or
// the fabric's defaults. A key that names no fabric level is an error
// naming the field and the keys that would work.
func NativeFabricRequest(pg *schedulingv1beta1.PodGroup, fabric *config.FabricConfig) (FabricRequest, error) {
	c := pg.Spec.SchedulingConstraints
	if c == nil || len(c.Topology) == 0 {
		return ParseFabricRequest(pg.Annotations, fabric)
	}
	key := c.Topology[0].Key
	var keys []string
	for _, l := range fabric.Levels {
		if l.NodeLabel == key {
			return FabricRequest{Level: l.Name, Mode: config.FabricModeRequired}, nil
		}
		if l.NodeLabel != "" {
			keys = append(keys, l.NodeLabel)
		}
	}
	return FabricRequest{}, field.NotSupported(field.NewPath("spec", "schedulingConstraints", "topology").Index(0).Child("key"), key, keys)
}

// InvalidError says why a gang's PodGroup cannot be acted on (it cannot be
// read, or asks for a placement that does not exist); its message is meant
// for the Event on the PodGroup and its pods.
type InvalidError struct {
	// Reason is an exported reason constant, for users to grep.
	Reason string
	Key    Key
	Err    error
}

// Reasons of InvalidError.
const (
	// ReasonInvalidRequest: a fabric annotation or topology constraint
	// has a bad value.
	ReasonInvalidRequest = "InvalidFabricRequest"
	// ReasonMalformedPodGroup: the PodGroup object could not be read.
	ReasonMalformedPodGroup = "MalformedPodGroup"
)

func (e *InvalidError) Error() string {
	what := "asks for a placement that does not exist"
	if e.Reason == ReasonMalformedPodGroup {
		what = "cannot be read"
	}
	return fmt.Sprintf("PodGroup %s/%s %s: %v", e.Key.Namespace, e.Key.Name, what, e.Err)
}

func (e *InvalidError) Unwrap() error { return e.Err }
