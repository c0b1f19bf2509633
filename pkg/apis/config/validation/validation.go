// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package validation checks sluice's plugin args. Plugins call it from New,
// so an invalid value stops the scheduler at start-up with the field path,
// e.g. "profiles[sluice-research].pluginConfig[FabricTopology].args.fabric.levels[1].nodeLabel".
package validation

import (
	"fmt"
	"net/url"
	"path/filepath"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// isReservedLevelName reports names no fabric level may have: "node" is
// the level below every switch and "any" means no level at all.
func isReservedLevelName(name string) bool { return name == "node" || name == config.FabricLevelAny }

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
		case isReservedLevelName(level.Name):
			errs = append(errs, field.Invalid(p.Child("name"), level.Name, "is reserved"))
		case names.Has(level.Name):
			errs = append(errs, field.Duplicate(p.Child("name"), level.Name))
		default:
			for _, msg := range utilvalidation.IsDNS1123Label(level.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), level.Name, msg))
			}
		}
		names.Insert(level.Name)
		switch {
		case level.NodeLabel == "" && fabric.Source == config.FabricSourceNodeLabels:
			errs = append(errs, field.Required(p.Child("nodeLabel"), "required when source is NodeLabels"))
		case level.NodeLabel == "":
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
	errs = append(errs, validateResourceName(path.Child("gpuResourceName"), fabric.GPUResourceName)...)
	if len(errs) == 0 {
		errs = append(errs, ValidateFabricLevelName(path.Child("defaultLevel"), fabric, fabric.DefaultLevel)...)
	}
	errs = append(errs, ValidateFabricMode(path.Child("defaultMode"), fabric.DefaultMode)...)
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
	var errs field.ErrorList
	if args.Fabric != nil {
		errs = ValidateFabricConfig(path.Child("fabric"), args.Fabric)
	}
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

// SlurmStates are the state words an unhealthy-state list may name: Slurm's
// base states and flags, as every supported slurmrestd version spells them.
func SlurmStates() []string {
	return []string{"INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE",
		"EXTERNAL", "RESERVED", "UNDRAIN", "CLOUD", "RESUME", "DRAIN", "COMPLETING", "NOT_RESPONDING",
		"POWERED_DOWN", "FAIL", "POWERING_UP", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_CANCELED",
		"POWERING_DOWN", "DYNAMIC_FUTURE", "REBOOT_ISSUED", "PLANNED", "INVALID_REG", "POWER_DOWN",
		"POWER_UP", "POWER_DRAIN", "DYNAMIC_NORM", "BLOCKED", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE"}
}

// ValidateSlurmConfig checks the Slurm connection.
func ValidateSlurmConfig(path *field.Path, c *config.SlurmConfig) field.ErrorList {
	var errs field.ErrorList
	positive := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be greater than 0"))
		}
	}
	positive("pollIntervalSeconds", c.PollIntervalSeconds)
	positive("requestTimeoutSeconds", c.RequestTimeoutSeconds)
	positive("maxStalenessSeconds", c.MaxStalenessSeconds)
	if c.MaxStalenessSeconds > 0 && c.MaxStalenessSeconds < c.PollIntervalSeconds {
		errs = append(errs, field.Invalid(path.Child("maxStalenessSeconds"), c.MaxStalenessSeconds, "must not be less than pollIntervalSeconds"))
	}
	switch c.FailureMode {
	case config.SlurmFailClosed, config.SlurmFailOpen:
	default:
		errs = append(errs, field.NotSupported(path.Child("failureMode"), c.FailureMode,
			[]config.SlurmFailureMode{config.SlurmFailClosed, config.SlurmFailOpen}))
	}
	known := sets.New(SlurmStates()...)
	for i, st := range c.UnhealthyStates {
		if !known.Has(st) {
			errs = append(errs, field.NotSupported(path.Child("unhealthyStates").Index(i), st, sets.List(known)))
		}
	}
	for _, l := range []struct{ name, label string }{
		{"nodeNameLabel", c.NodeNameLabel}, {"sharedNodeLabel", c.SharedNodeLabel}, {"managedNodeLabel", c.ManagedNodeLabel},
	} {
		if l.label != "" {
			errs = append(errs, metav1validation.ValidateLabelName(l.label, path.Child(l.name))...)
		}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("endpoint"), c.Endpoint, err.Error()))
		case u.Scheme == "http":
			errs = append(errs, field.Invalid(path.Child("endpoint"), c.Endpoint,
				"the token is never sent over plain http: use https://host:port (slurmrestd behind TLS) or unix:///path (local auth)"))
		case u.Scheme != "https" && u.Scheme != "unix":
			errs = append(errs, field.Invalid(path.Child("endpoint"), c.Endpoint, "want https://host:port or unix:///path"))
		case u.Scheme == "https" && c.TokenFile == "":
			errs = append(errs, field.Required(path.Child("tokenFile"), "an https endpoint needs a JWT token file"))
		}
	}
	if c.GRESName == "" {
		errs = append(errs, field.Required(path.Child("gresName"), ""))
	}
	if c.Commands != "" && !filepath.IsAbs(c.Commands) {
		errs = append(errs, field.Invalid(path.Child("commands"), c.Commands, "must be an absolute path"))
	}
	if d := c.Drain; d != nil {
		drain := path.Child("drain")
		if _, err := labels.Parse(d.SlurmdPodSelector); err != nil {
			errs = append(errs, field.Invalid(drain.Child("slurmdPodSelector"), d.SlurmdPodSelector, err.Error()))
		} else if d.SlurmdPodSelector != "" && len(d.SlurmdNamespaces) == 0 {
			errs = append(errs, field.Required(drain.Child("slurmdNamespaces"), "the namespaces slurmd pods run in: any tenant can label a pod"))
		}
		for i, ns := range d.SlurmdNamespaces {
			for _, msg := range utilvalidation.IsDNS1123Label(ns) {
				errs = append(errs, field.Invalid(drain.Child("slurmdNamespaces").Index(i), ns, msg))
			}
		}
		if d.WritesPerSecond <= 0 {
			errs = append(errs, field.Invalid(drain.Child("writesPerSecond"), d.WritesPerSecond, "must be greater than 0"))
		}
		if d.Enabled && c.Endpoint == "" {
			errs = append(errs, field.Required(path.Child("endpoint"), "drains need Slurm's node state: set the slurmrestd endpoint"))
		}
	}
	if p := c.Placeholders; p != nil {
		ph := path.Child("placeholders")
		if p.TimeoutSeconds <= 0 || p.TimeoutSeconds > 600 {
			errs = append(errs, field.Invalid(ph.Child("timeoutSeconds"), p.TimeoutSeconds, "must be between 1 and 600"))
		}
		if p.ResyncSeconds <= 0 {
			errs = append(errs, field.Invalid(ph.Child("resyncSeconds"), p.ResyncSeconds, "must be greater than 0"))
		}
		if p.Enabled && c.Endpoint == "" {
			errs = append(errs, field.Required(path.Child("endpoint"), "placeholder jobs need Slurm's node state: set the slurmrestd endpoint"))
		}
		if p.Enabled && c.SharedNodeLabel == "" {
			errs = append(errs, field.Required(path.Child("sharedNodeLabel"), "placeholder jobs are for nodes shared with slurmd: set the label that marks them"))
		}
	}
	return errs
}

// ValidateSlurmNodeStateArgs checks SlurmNodeStateArgs.
func ValidateSlurmNodeStateArgs(path *field.Path, args *config.SlurmNodeStateArgs) error {
	var errs field.ErrorList
	if args.Slurm != nil {
		errs = ValidateSlurmConfig(path.Child("slurm"), args.Slurm)
	}
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
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs = append(errs, metav1validation.ValidateLabelSelector(c.ResearchNamespaces, opts, path.Child("researchNamespaces"))...)
	errs = append(errs, metav1validation.ValidateLabelSelector(c.ProductionNamespaces, opts, path.Child("productionNamespaces"))...)
	if c.OverflowTaintKey == "" {
		errs = append(errs, field.Required(path.Child("overflowTaintKey"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(c.OverflowTaintKey, path.Child("overflowTaintKey"))...)
	}
	return errs
}

// ValidateInferencePackingArgs checks InferencePackingArgs.
func ValidateInferencePackingArgs(path *field.Path, args *config.InferencePackingArgs) error {
	var errs field.ErrorList
	if args.Overflow != nil {
		errs = append(errs, ValidateOverflowConfig(path.Child("overflow"), args.Overflow)...)
	}
	if args.Fabric != nil {
		errs = append(errs, ValidateFabricConfig(path.Child("fabric"), args.Fabric)...)
	}
	return errs.ToAggregate()
}

// ValidateClaimsConfig checks the claim engine's configuration.
func ValidateClaimsConfig(path *field.Path, c *config.ClaimsConfig) field.ErrorList {
	var errs field.ErrorList
	for _, v := range []struct {
		name  string
		value int64
	}{{"waveTimeoutSeconds", c.WaveTimeoutSeconds}, {"replacementTimeoutSeconds", c.ReplacementTimeoutSeconds}, {"retryBackoffSeconds", c.RetryBackoffSeconds}} {
		if v.value <= 0 {
			errs = append(errs, field.Invalid(path.Child(v.name), v.value, "must be greater than 0"))
		}
	}
	if v, err := intstr.GetScaledValueFromIntOrPercent(&c.DefaultMaxUnavailable, 100, false); err != nil || v <= 0 {
		errs = append(errs, field.Invalid(path.Child("defaultMaxUnavailable"), c.DefaultMaxUnavailable.String(), "must be a positive integer or percent"))
	}
	if c.MakeBeforeBreak {
		switch {
		case c.WarmTimeoutSeconds <= 0:
			errs = append(errs, field.Invalid(path.Child("warmTimeoutSeconds"), c.WarmTimeoutSeconds, "must be greater than 0"))
		case c.WarmTimeoutSeconds >= c.WaveTimeoutSeconds:
			// Waiting for warm instances evicts nothing: a claim would
			// be given up before it fell back to break-before-make.
			errs = append(errs, field.Invalid(path.Child("warmTimeoutSeconds"), c.WarmTimeoutSeconds,
				fmt.Sprintf("must be below waveTimeoutSeconds (%d)", c.WaveTimeoutSeconds)))
		}
	}
	return errs
}

// ValidateReturnConfig checks the return controller's configuration.
func ValidateReturnConfig(path *field.Path, c *config.ReturnConfig) field.ErrorList {
	var errs field.ErrorList
	for _, v := range []struct {
		name  string
		value int64
	}{{"hysteresisSeconds", c.HysteresisSeconds}, {"minWaveIntervalSeconds", c.MinWaveIntervalSeconds}} {
		if v.value < 0 {
			errs = append(errs, field.Invalid(path.Child(v.name), v.value, "must not be negative"))
		}
	}
	if c.PollIntervalSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("pollIntervalSeconds"), c.PollIntervalSeconds, "must be greater than 0"))
	}
	if c.MaxPodsPerWave <= 0 {
		errs = append(errs, field.Invalid(path.Child("maxPodsPerWave"), c.MaxPodsPerWave, "must be greater than 0"))
	}
	if c.WaveTimeoutSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("waveTimeoutSeconds"), c.WaveTimeoutSeconds, "must be greater than 0"))
	}
	return errs
}

// ValidateOverflowPreemptionArgs checks OverflowPreemptionArgs.
func ValidateOverflowPreemptionArgs(path *field.Path, args *config.OverflowPreemptionArgs) error {
	var errs field.ErrorList
	if args.Overflow != nil {
		errs = append(errs, ValidateOverflowConfig(path.Child("overflow"), args.Overflow)...)
	}
	if args.Fabric != nil {
		errs = append(errs, ValidateFabricConfig(path.Child("fabric"), args.Fabric)...)
	}
	if args.Claims != nil {
		errs = append(errs, ValidateClaimsConfig(path.Child("claims"), args.Claims)...)
	}
	if args.Return != nil {
		errs = append(errs, ValidateReturnConfig(path.Child("return"), args.Return)...)
	}
	return errs.ToAggregate()
}
