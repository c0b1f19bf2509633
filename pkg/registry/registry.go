// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package registry is the one list of sluice's scheduler plugins. The
// sluice-scheduler binary, the integration-test harness, the simulator and
// the benchmarks all build their schedulers from it, so they run the same
// plugins with the same typed arguments.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/sluice-sched/sluice/pkg/plugins/fabrictopology"
	"github.com/sluice-sched/sluice/pkg/plugins/gang"
	"github.com/sluice-sched/sluice/pkg/plugins/inferencepacking"
	"github.com/sluice-sched/sluice/pkg/plugins/overflowpreemption"
	"github.com/sluice-sched/sluice/pkg/plugins/slurmnodestate"

	// Registers the typed plugin args into kube-scheduler's config scheme,
	// so a KubeSchedulerConfiguration that configures sluice's plugins
	// decodes, defaults and converts them strictly.
	_ "github.com/sluice-sched/sluice/pkg/apis/config/scheme"
)

// Registry returns sluice's out-of-tree plugins by name. kube-scheduler
// merges it with the in-tree registry; a name clash is an error at start-up.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		fabrictopology.Name:     fabrictopology.New,
		gang.Name:               gang.New,
		slurmnodestate.Name:     slurmnodestate.New,
		inferencepacking.Name:   inferencepacking.New,
		overflowpreemption.Name: overflowpreemption.New,
	}
}

// Options returns Registry as kube-scheduler command options, for
// app.NewSchedulerCommand and app.Setup.
func Options() []app.Option {
	reg := Registry()
	opts := make([]app.Option, 0, len(reg))
	for name, factory := range reg {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}
