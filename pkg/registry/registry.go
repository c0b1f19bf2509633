// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package registry builds sluice's scheduler plugins around one Runtime
// per scheduler process. The sluice-scheduler binary, the integration-test
// harness, the simulator and the benchmarks all build their schedulers
// from it, so they run the same plugins with the same typed arguments:
//
//	rt := registry.New()
//	cmd := app.NewSchedulerCommand(rt.Options()...)
package registry

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"
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

// Registry returns sluice's out-of-tree plugins by name, all sharing rt.
// kube-scheduler merges it with the in-tree registry; a name clash is an
// error at start-up.
func (rt *Runtime) Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		fabrictopology.Name:     fabrictopology.New(rt),
		gang.Name:               gang.New(rt),
		slurmnodestate.Name:     slurmnodestate.New(rt),
		inferencepacking.Name:   inferencepacking.New(rt),
		overflowpreemption.Name: overflowpreemption.New(rt),
	}
}

// Options returns Registry as kube-scheduler command options, for
// app.NewSchedulerCommand and app.Setup.
func (rt *Runtime) Options() []app.Option {
	reg := rt.Registry()
	opts := make([]app.Option, 0, len(reg))
	for name, factory := range reg {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}

// PerScheduler returns sluice's plugins for a caller that builds several
// schedulers from one registry (upstream's scheduler_perf does, one per
// workload): each scheduler, told apart by its informer factory, gets a
// Runtime of its own, dropped when the scheduler's context ends, whose
// claim engine and return controller start when it is sealed (such
// schedulers elect no leader and are never attached).
func PerScheduler() frameworkruntime.Registry {
	var mu sync.Mutex
	runtimes := map[informers.SharedInformerFactory]frameworkruntime.Registry{}
	registryOf := func(ctx context.Context, h fwk.Handle) frameworkruntime.Registry {
		mu.Lock()
		defer mu.Unlock()
		key := h.SharedInformerFactory()
		reg, ok := runtimes[key]
		if !ok {
			rt := New()
			rt.autoStart = true
			reg = rt.Registry()
			runtimes[key] = reg
			go func() {
				<-ctx.Done()
				mu.Lock()
				delete(runtimes, key)
				mu.Unlock()
			}()
		}
		return reg
	}
	out := frameworkruntime.Registry{}
	for name := range New().Registry() {
		out[name] = func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return registryOf(ctx, h)[name](ctx, obj, h)
		}
	}
	return out
}
