// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package validation checks sluice's plugin args. Plugins call it from New,
// so an invalid value stops the scheduler at start-up with the field path,
// e.g. "profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.levels[1].nodeLabel".
package validation

import (
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

// ArgsPath is the field path of a plugin's args inside a
// KubeSchedulerConfiguration, keyed by profile and plugin name.
func ArgsPath(profile, plugin string) *field.Path {
	return field.NewPath("profiles").Key(profile).Child("pluginConfig").Key(plugin).Child("args")
}

// reservedLevelNames cannot name a fabric level: "node" is the level below
// every switch and "any" means no level at all.
var reservedLevelNames = sets.New("node", config.FabricLevelAny)

// ValidateFabricConfig checks a fabric description.
func ValidateFabricConfig(path *field.Path, fabric *config.FabricConfig) field.ErrorList {
	var errs field.ErrorList
	switch fabric.Source {
	case config.FabricSourceNodeLabels, config.FabricSourceSlurmTopology:
	default:
		errs = append(errs, field.NotSupported(path.Child("source"), fabric.Source,
			[]config.FabricSource{config.FabricSourceNodeLabels, config.FabricSourceSlurmTopology}))
	}
	levelsPath := path.Child("levels")
	if len(fabric.Levels) == 0 {
		errs = append(errs, field.Required(levelsPath, "at least one switch level"))
	}
	names := sets.New[string]()
	labels := sets.New[string]()
	for i, level := range fabric.Levels {
		p := levelsPath.Index(i)
		switch {
		case level.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case reservedLevelNames.Has(level.Name):
			errs = append(errs, field.Invalid(p.Child("name"), level.Name, "is reserved"))
		case names.Has(level.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), level.Name))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(level.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), level.Name, msg))
			}
		}
		names.Insert(level.Name)
		if fabric.Source != config.FabricSourceNodeLabels {
			continue
		}
		switch {
		case level.NodeLabel == "":
			errs = append(errs, field.Required(p.Child("nodeLabel"), "required when source is NodeLabels"))
		case labels.Has(level.NodeLabel):
			errs = append(errs, field.Duplicate(p.Child("nodeLabel"), level.NodeLabel))
		default:
			errs = append(errs, metav1validation.ValidateLabelName(level.NodeLabel, p.Child("nodeLabel"))...)
		}
		labels.Insert(level.NodeLabel)
	}
	if fabric.Source == config.FabricSourceSlurmTopology && fabric.SlurmTopologyFile == "" {
		errs = append(errs, field.Required(path.Child("slurmTopologyFile"), "required when source is SlurmTopology"))
	}
	if fabric.SlurmNodeNameLabel != "" {
		errs = append(errs, metav1validation.ValidateLabelName(fabric.SlurmNodeNameLabel, path.Child("slurmNodeNameLabel"))...)
	}
	errs = append(errs, validateResourceName(path.Child("gpuResourceName"), fabric.GPUResourceName)...)
	return errs
}

func validateResourceName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// ValidateFabricLevelName checks a level asked for by a gang or a default:
// a configured level name or "any".
func ValidateFabricLevelName(path *field.Path, fabric *config.FabricConfig, level string) field.ErrorList {
	allowed := []string{config.FabricLevelAny}
	for _, l := range fabric.Levels {
		if l.Name == level {
			return nil
		}
		allowed = append(allowed, l.Name)
	}
	if level == config.FabricLevelAny {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, level, allowed)}
}

// ValidateFabricMode checks a fabric mode.
func ValidateFabricMode(path *field.Path, mode config.FabricMode) field.ErrorList {
	switch mode {
	case config.FabricModeRequired, config.FabricModePreferred:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, mode, []config.FabricMode{config.FabricModeRequired, config.FabricModePreferred})}
}

// ValidateFabricTopologyArgs checks FabricTopologyArgs.
func ValidateFabricTopologyArgs(path *field.Path, args *config.FabricTopologyArgs) error {
	errs := ValidateFabricConfig(path.Child("fabric"), &args.Fabric)
	if len(errs) == 0 {
		errs = append(errs, ValidateFabricLevelName(path.Child("defaultLevel"), &args.Fabric, args.DefaultLevel)...)
	}
	errs = append(errs, ValidateFabricMode(path.Child("defaultMode"), args.DefaultMode)...)
	return errs.ToAggregate()
}

// ValidateGangArgs checks GangArgs.
func ValidateGangArgs(path *field.Path, args *config.GangArgs) error {
	var errs field.ErrorList
	if args.DefaultScheduleTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("defaultScheduleTimeoutSeconds"), args.DefaultScheduleTimeoutSeconds, "must be greater than 0"))
	}
	if args.RejectedGangBackoffSeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("rejectedGangBackoffSeconds"), args.RejectedGangBackoffSeconds, "must not be negative"))
	}
	return errs.ToAggregate()
}
