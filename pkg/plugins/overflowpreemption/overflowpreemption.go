// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflowpreemption is the OverflowPreemption plugin (research
// profile) and the return controller that runs beside it.
//
// When a research pod or gang does not fit, OverflowPreemption frees room
// for it by moving production pods to the overflow (virtual-kubelet) nodes:
// only overflow-eligible production pods (they tolerate the overflow taint
// and are not annotated sluice.dev/overflow: never), only as many as the
// Ready overflow nodes have room for, and for a gang all inside one fabric
// domain (fewest victims, then best fit). Evictions go through the Eviction
// API in PodDisruptionBudget-respecting waves; the research pods keep their
// nominations meanwhile, so nothing else takes the freed GPUs. Research
// never preempts research, and production (preemptionPolicy: Never, and a
// profile without this plugin) never preempts anything.
//
// The return controller moves production back to physical nodes once
// room for it has stayed free for a hysteresis window, one PDB-respecting
// wave at a time, and never while research waits.
package overflowpreemption

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/plugins/fabrictopology"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "OverflowPreemption"

// Reasons in statuses and events, for users to grep.
const (
	ReasonClaiming    = "ClaimingGPUs"
	ReasonNoClaim     = "NoOverflowClaim"
	ReasonNotResearch = "NotResearch"
)

// OverflowPreemption is the plugin.
type OverflowPreemption struct {
	handle    fwk.Handle
	args      *config.OverflowPreemptionArgs
	classes   *overflow.Classes
	tracker   *fabric.Tracker
	gpu       v1.ResourceName
	defaults  gang.FabricRequest
	podGroups *gang.PodGroups
	members   *gang.Members
	claims    *claims
	waiting   *waiting
}

// OverflowPreemption is not a fwk.SignPlugin and needs not be: the
// framework signs pods only with PreFilter, Filter, PreScore and Score
// plugins, and this one has none of those, so it does not turn off
// opportunistic batching.
var (
	_ fwk.PostFilterPlugin         = &OverflowPreemption{}
	_ fwk.PodGroupPostFilterPlugin = &OverflowPreemption{}
	_ fwk.PostBindPlugin           = &OverflowPreemption{}
)

// New builds the plugin from OverflowPreemptionArgs and starts its
// eviction loop and, if enabled, the return controller.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.OverflowPreemptionArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type OverflowPreemptionArgs, got %T", obj)
	}
	if err := validation.ValidateOverflowPreemptionArgs(validation.ArgsPath(h.ProfileName(), Name), args); err != nil {
		return nil, err
	}
	metrics.Register()
	classes, err := overflow.ClassesFrom(&args.Overflow)
	if err != nil {
		return nil, err
	}
	informers := h.SharedInformerFactory()
	tracker, err := fabrictopology.Tracker(ctx, &args.Fabric, h)
	if err != nil {
		return nil, err
	}
	podGroups, err := gang.SharedPodGroups(ctx, h.ClientSet(), h.KubeConfig())
	if err != nil {
		return nil, err
	}
	w := &waves{
		client:   h.ClientSet(),
		pods:     informers.Core().V1().Pods().Lister(),
		pdbs:     informers.Policy().V1().PodDisruptionBudgets().Lister(),
		rss:      informers.Apps().V1().ReplicaSets().Lister(),
		recorder: h.EventRecorder(),
		reason:   "preemption",
	}
	pl := &OverflowPreemption{
		handle:    h,
		args:      args,
		classes:   classes,
		tracker:   tracker,
		gpu:       v1.ResourceName(args.Fabric.GPUResourceName),
		defaults:  gang.FabricRequest{Level: args.DefaultLevel, Mode: args.DefaultMode},
		podGroups: podGroups,
		members:   gang.NewMembers(informers.Core().V1().Pods().Informer()),
		claims:    newClaims(w, time.Duration(args.WaveTimeoutSeconds)*time.Second),
	}
	pl.claims.activate = func(ctx context.Context, pods []*v1.Pod) {
		byName := make(map[string]*v1.Pod, len(pods))
		for _, p := range pods {
			byName[p.Namespace+"/"+p.Name] = p
		}
		h.Activate(klog.FromContext(ctx), byName)
	}
	if pl.waiting, err = newWaiting(ctx, h, classes); err != nil {
		return nil, err
	}
	go pl.claims.run(ctx, 250*time.Millisecond)
	if args.Return.Enabled {
		r, err := newReturner(h, classes, &args.Return, pl.claims)
		if err != nil {
			return nil, err
		}
		go r.run(ctx)
	}
	klog.FromContext(ctx).V(2).Info("OverflowPreemption ready", "profile", h.ProfileName(), "return", args.Return.Enabled)
	return pl, nil
}

// Name returns the plugin name.
func (pl *OverflowPreemption) Name() string { return Name }

// PostBind ends a claim once all its pods are bound.
func (pl *OverflowPreemption) PostBind(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	if pl.classes.IsResearch(pod) {
		pl.claims.boundPod(pod)
	}
}
