// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package validation checks sluice's plugin args. Plugins call it from New,
// so an invalid value stops the scheduler at start-up with the field path,
// e.g. "profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.levels[1].nodeLabel".
package validation

import (
	"net/url"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
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

// slurmStates are the state words an unhealthy-state list may name.
var slurmStates = sets.New("INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE",
	"EXTERNAL", "RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING", "NOT_RESPONDING",
	"POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_CANCELED",
	"POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED", "INVALID_REG", "POWER_DOWN",
	"POWER_UP", "POWER_DRAIN", "DYNAMIC_NORM", "BLOCKED", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE")

// ValidateSlurmNodeStateArgs checks SlurmNodeStateArgs.
func ValidateSlurmNodeStateArgs(path *field.Path, args *config.SlurmNodeStateArgs) error {
	var errs field.ErrorList
	positive := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be greater than 0"))
		}
	}
	positive("pollIntervalSeconds", args.PollIntervalSeconds)
	positive("requestTimeoutSeconds", args.RequestTimeoutSeconds)
	positive("maxStalenessSeconds", args.MaxStalenessSeconds)
	if args.MaxStalenessSeconds > 0 && args.MaxStalenessSeconds < args.PollIntervalSeconds {
		errs = append(errs, field.Invalid(path.Child("maxStalenessSeconds"), args.MaxStalenessSeconds, "must not be less than pollIntervalSeconds"))
	}
	switch args.FailureMode {
	case config.SlurmFailClosed, config.SlurmFailOpen:
	default:
		errs = append(errs, field.NotSupported(path.Child("failureMode"), args.FailureMode,
			[]config.SlurmFailureMode{config.SlurmFailClosed, config.SlurmFailOpen}))
	}
	for i, st := range args.UnhealthyStates {
		if !slurmStates.Has(st) {
			errs = append(errs, field.NotSupported(path.Child("unhealthyStates").Index(i), st, sets.List(slurmStates)))
		}
	}
	for name, label := range map[string]string{"nodeNameLabel": args.NodeNameLabel, "sharedNodeLabel": args.SharedNodeLabel, "managedNodeLabel": args.ManagedNodeLabel} {
		if label != "" {
			errs = append(errs, metav1validation.ValidateLabelName(label, path.Child(name))...)
		}
	}
	if args.Endpoint != "" {
		u, err := url.Parse(args.Endpoint)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("endpoint"), args.Endpoint, err.Error()))
		case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix":
			errs = append(errs, field.Invalid(path.Child("endpoint"), args.Endpoint, "want http://host:port, https://host:port or unix:///path"))
		case u.Scheme != "unix" && args.TokenFile == "":
			errs = append(errs, field.Required(path.Child("tokenFile"), "an http(s) endpoint needs a JWT token file"))
		}
	}
	if args.GRESName == "" {
		errs = append(errs, field.Required(path.Child("gresName"), ""))
	}
	errs = append(errs, validateResourceName(path.Child("gpuResourceName"), args.GPUResourceName)...)
	return errs.ToAggregate()
}

// ValidateOverflowConfig checks the classes and overflow node description.
func ValidateOverflowConfig(path *field.Path, c *config.OverflowConfig) field.ErrorList {
	var errs field.ErrorList
	if len(c.ResearchPriorityClasses) == 0 {
		errs = append(errs, field.Required(path.Child("researchPriorityClasses"), ""))
	}
	if len(c.ProductionPriorityClasses) == 0 {
		errs = append(errs, field.Required(path.Child("productionPriorityClasses"), ""))
	}
	research := sets.New(c.ResearchPriorityClasses...)
	for i, pc := range c.ProductionPriorityClasses {
		if research.Has(pc) {
			errs = append(errs, field.Invalid(path.Child("productionPriorityClasses").Index(i), pc, "is also a research class"))
		}
	}
	if _, err := labels.Parse(c.OverflowNodeSelector); err != nil {
		errs = append(errs, field.Invalid(path.Child("overflowNodeSelector"), c.OverflowNodeSelector, err.Error()))
	}
	if c.OverflowTaintKey == "" {
		errs = append(errs, field.Required(path.Child("overflowTaintKey"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(c.OverflowTaintKey, path.Child("overflowTaintKey"))...)
	}
	return errs
}

// ValidateInferencePackingArgs checks InferencePackingArgs.
func ValidateInferencePackingArgs(path *field.Path, args *config.InferencePackingArgs) error {
	errs := ValidateOverflowConfig(path.Child("overflow"), &args.Overflow)
	errs = append(errs, ValidateFabricConfig(path.Child("fabric"), &args.Fabric)...)
	return errs.ToAggregate()
}

// ValidateOverflowPreemptionArgs checks OverflowPreemptionArgs.
func ValidateOverflowPreemptionArgs(path *field.Path, args *config.OverflowPreemptionArgs) error {
	errs := ValidateOverflowConfig(path.Child("overflow"), &args.Overflow)
	fabricErrs := ValidateFabricConfig(path.Child("fabric"), &args.Fabric)
	errs = append(errs, fabricErrs...)
	if len(fabricErrs) == 0 {
		errs = append(errs, ValidateFabricLevelName(path.Child("defaultLevel"), &args.Fabric, args.DefaultLevel)...)
	}
	errs = append(errs, ValidateFabricMode(path.Child("defaultMode"), args.DefaultMode)...)
	if args.WaveTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("waveTimeoutSeconds"), args.WaveTimeoutSeconds, "must be greater than 0"))
	}
	r := path.Child("return")
	for name, v := range map[string]int64{
		"hysteresisSeconds": args.Return.HysteresisSeconds, "minWaveIntervalSeconds": args.Return.MinWaveIntervalSeconds,
	} {
		if v < 0 {
			errs = append(errs, field.Invalid(r.Child(name), v, "must not be negative"))
		}
	}
	if args.Return.PollIntervalSeconds <= 0 {
		errs = append(errs, field.Invalid(r.Child("pollIntervalSeconds"), args.Return.PollIntervalSeconds, "must be greater than 0"))
	}
	if args.Return.MaxPodsPerWave <= 0 {
		errs = append(errs, field.Invalid(r.Child("maxPodsPerWave"), args.Return.MaxPodsPerWave, "must be greater than 0"))
	}
	if args.Return.Enabled {
		for _, msg := range utilvalidation.IsDNS1123Label(args.Return.LeaseNamespace) {
			errs = append(errs, field.Invalid(r.Child("leaseNamespace"), args.Return.LeaseNamespace, msg))
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(args.Return.LeaseName) {
			errs = append(errs, field.Invalid(r.Child("leaseName"), args.Return.LeaseName, msg))
		}
	}
	return errs.ToAggregate()
}
