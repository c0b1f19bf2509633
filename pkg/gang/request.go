// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"fmt"
	"strings"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
)

// Annotations on a PodGroup (of either API), or on its pods' template
// when the PodGroup has none, that shape its placement.
const (
	// FabricLevelAnnotation is the fabric level the gang must or should
	// fit in: a configured level name (leaf, spine, block) or "any".
	FabricLevelAnnotation = "sluice.dev/fabric-level"
	// FabricModeAnnotation is "required" or "preferred".
	FabricModeAnnotation = "sluice.dev/fabric-mode"
	// KueueRequiredTopologyAnnotation and KueuePreferredTopologyAnnotation
	// are Kueue's topology-aware scheduling requests: a node label key,
	// which names the fabric level whose nodeLabel it is.
	KueueRequiredTopologyAnnotation  = "kueue.x-k8s.io/podset-required-topology"
	KueuePreferredTopologyAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
)

// fabricAnnotations are the annotations a fabric request is read from.
func fabricAnnotations() [4]string {
	return [4]string{FabricLevelAnnotation, FabricModeAnnotation, KueueRequiredTopologyAnnotation, KueuePreferredTopologyAnnotation}
}

// FabricRequest is where a gang asks to be placed.
type FabricRequest struct {
	// Level is a configured level name or "any".
	Level string
	// Mode says whether Level is a requirement.
	Mode config.FabricMode
}

// ParseFabricRequest reads fabric annotations, falling back to the
// fabric's defaults: sluice's own (level and mode, in any case: "Leaf",
// "required"), else Kueue's podset-required-topology or
// podset-preferred-topology (a node label key: the level it labels). The
// error names the annotation and the bad value.
func ParseFabricRequest(annotations map[string]string, fabric *config.FabricConfig) (FabricRequest, error) {
	req := FabricRequest{Level: fabric.DefaultLevel, Mode: fabric.DefaultMode}
	path := field.NewPath("metadata", "annotations")
	_, sluiceLevel := annotations[FabricLevelAnnotation]
	if v, ok := annotations[FabricLevelAnnotation]; ok {
		level, errs := levelNamed(path.Key(FabricLevelAnnotation), fabric, v)
		if len(errs) > 0 {
			return req, errs.ToAggregate()
		}
		req.Level = level
	}
	if v, ok := annotations[FabricModeAnnotation]; ok {
		switch {
		case strings.EqualFold(v, "required"):
			req.Mode = config.FabricModeRequired
		case strings.EqualFold(v, "preferred"):
			req.Mode = config.FabricModePreferred
		default:
			return req, field.NotSupported(path.Key(FabricModeAnnotation), v, []string{"required", "preferred"})
		}
	}
	if sluiceLevel {
		return req, nil
	}
	for _, k := range []struct {
		annotation string
		mode       config.FabricMode
	}{{KueueRequiredTopologyAnnotation, config.FabricModeRequired}, {KueuePreferredTopologyAnnotation, config.FabricModePreferred}} {
		if key, ok := annotations[k.annotation]; ok {
			level, err := levelLabelled(path.Key(k.annotation), fabric, key)
			if err != nil {
				return req, err
			}
			return FabricRequest{Level: level, Mode: k.mode}, nil
		}
	}
	return req, nil
}

// levelNamed is the configured level (or "any") named v in any case.
func levelNamed(p *field.Path, fabric *config.FabricConfig, v string) (string, field.ErrorList) {
	if strings.EqualFold(v, config.FabricLevelAny) {
		return config.FabricLevelAny, nil
	}
	for _, l := range fabric.Levels {
		if strings.EqualFold(v, l.Name) {
			return l.Name, nil
		}
	}
	return "", validation.ValidateFabricLevelName(p, fabric, v)
}

// levelLabelled is the level whose node label is key; an error names p
// and the keys that would work.
func levelLabelled(p *field.Path, fabric *config.FabricConfig, key string) (string, error) {
	var keys []string
	for _, l := range fabric.Levels {
		if l.NodeLabel == key {
			return l.Name, nil
		}
		if l.NodeLabel != "" {
			keys = append(keys, l.NodeLabel)
		}
	}
	return "", field.NotSupported(p, key, keys)
}

// NativeFabricRequest is where a native PodGroup asks to be placed: its
// spec.schedulingConstraints.topology, when set, requires the fabric level
// whose node label is the constraint's key (upstream's meaning: all pods
// in one domain of that label); otherwise the fabric annotations (the
// PodGroup's, or its pods'), or the fabric's defaults. A key that names no
// fabric level is an error naming the field and the keys that would work.
func NativeFabricRequest(pg *schedulingv1beta1.PodGroup, annotations map[string]string, fabric *config.FabricConfig) (FabricRequest, error) {
	c := pg.Spec.SchedulingConstraints
	if c == nil || len(c.Topology) == 0 {
		return ParseFabricRequest(annotations, fabric)
	}
	level, err := levelLabelled(field.NewPath("spec", "schedulingConstraints", "topology").Index(0).Child("key"), fabric, c.Topology[0].Key)
	if err != nil {
		return FabricRequest{}, err
	}
	return FabricRequest{Level: level, Mode: config.FabricModeRequired}, nil
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
