// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflowpreemption is the OverflowPreemption plugin (research
// profile): when a research pod or gang does not fit, it plans the claim
// that frees room for it by moving production pods to the overflow
// (virtual-kubelet) nodes, and hands it to the scheduler runtime's claim
// engine (pkg/claims), which evicts in PodDisruptionBudget-safe waves.
//
// Victims are only overflow-eligible production pods (they tolerate the
// overflow taint and are not annotated sluice.dev/overflow: never), only
// as many as the Ready overflow nodes have room for, and for a gang all
// inside one fabric domain (fewest victims, then best fit). The research
// pods keep their nominations meanwhile, so nothing else takes the freed
// GPUs. Research never preempts research, and production
// (preemptionPolicy: Never, and a profile without this plugin) never
// preempts anything. The runtime also runs the return controller
// (pkg/returns), which brings production back.
package overflowpreemption

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/claims/plan"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "OverflowPreemption"

// Reasons in statuses and events, for users to grep.
const (
	ReasonClaiming    = "ClaimingGPUs"
	ReasonNoClaim     = "NoOverflowClaim"
	ReasonNotResearch = "NotResearch"
	// ReasonStays is the Event on a production pod a research claim
	// needed that cannot move (no overflow provider can run it, or its
	// budget or controller does not allow it).
	ReasonStays = "CannotMoveToOverflow"
)

// Runtime is what the plugin needs of the scheduler's sluice runtime.
type Runtime interface {
	Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error
	Seal() error
	Fabric() (*fabric.Tracker, *config.FabricConfig)
	Classes() *overflow.Classes
	Gangs() *gang.Gangs
	External() capacity.External
	// RunClaims asks for the claim engine and the return controller,
	// started at the seal. Claims is the claims' store, Ledger the
	// disruption ledger (what may be moved), ClaimsConfig the engine's
	// settings.
	RunClaims(h fwk.Handle)
	Claims() *claims.Store
	Ledger() *disruption.Ledger
	ClaimsConfig() config.ClaimsConfig
}

// OverflowPreemption is the plugin.
type OverflowPreemption struct {
	rt     Runtime
	handle fwk.Handle
	// Taken from the runtime when it is sealed (ready).
	classes *overflow.Classes
	tracker *fabric.Tracker
	gangs   *gang.Gangs
	store   *claims.Store
	// planner plans the claims; this plugin gathers what it needs from
	// the scheduler and records what it decides.
	planner *plan.Planner
	// waiting are research pods that found no overflow room, retried when
	// an overflow node gains room.
	waiting *requeue.Waiting

	once    sync.Once
	initErr error
}

// OverflowPreemption is not a fwk.SignPlugin and needs not be: the
// framework signs pods only with PreFilter, Filter, PreScore and Score
// plugins, and this one has none of those, so it does not turn off
// opportunistic batching.
var (
	_ fwk.PostFilterPlugin         = &OverflowPreemption{}
	_ fwk.PodGroupPostFilterPlugin = &OverflowPreemption{}
)

// New returns the plugin's factory over rt. Its args may state the classes,
// the fabric, the claim engine's and the return controller's settings
// (each once in the whole configuration).
func New(rt Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.OverflowPreemptionArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type OverflowPreemptionArgs, got %T", obj)
		}
		path := validation.ArgsPath(h.ProfileName(), Name)
		if err := validation.ValidateOverflowPreemptionArgs(path, args); err != nil {
			return nil, err
		}
		facts := config.Facts{Overflow: args.Overflow, Fabric: args.Fabric, Claims: args.Claims, Return: args.Return}
		if err := rt.Declare(ctx, h, path, facts); err != nil {
			return nil, err
		}
		rt.RunClaims(h)
		return &OverflowPreemption{rt: rt, handle: h, waiting: requeue.NewWaiting(h)}, nil
	}
}

// Name returns the plugin name.
func (pl *OverflowPreemption) Name() string { return Name }

// ready takes what the plugin shares from the sealed runtime, once. A
// PostFilter plugin is never asked for its events (kube-scheduler asks
// only plugins that reject pods), so this runs at the first use; the
// runtime is sealed by then (the other plugins' EventsToRegister sealed it
// at start-up). PostFilter plugins take no part in requeueing either, so
// the pods waiting for overflow room are retried by the plugin itself
// (requeue.go).
func (pl *OverflowPreemption) ready(ctx context.Context) error {
	pl.once.Do(func() {
		if pl.initErr = pl.rt.Seal(); pl.initErr != nil {
			return
		}
		tracker, fabricCfg := pl.rt.Fabric()
		pl.tracker, pl.classes, pl.gangs, pl.store = tracker, pl.rt.Classes(), pl.rt.Gangs(), pl.rt.Claims()
		pl.planner = &plan.Planner{Classes: pl.classes, Budgets: pl.rt.Ledger(), Holdings: pl.store, External: pl.rt.External(),
			GPU: v1.ResourceName(fabricCfg.GPUResourceName), Config: pl.rt.ClaimsConfig()}
		pl.initErr = pl.watchOverflowRoom(ctx)
	})
	return pl.initErr
}
