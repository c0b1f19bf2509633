// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package fabrictopology is the FabricTopology plugin: it places every gang
// inside the lowest level of the InfiniBand fabric that can hold it (a node,
// a leaf switch, a spine, a block, or failing all, the cluster), choosing the
// best-fit domain so that large free domains stay whole.
//
// Native gangs (scheduling.k8s.io/v1beta1 PodGroups) are placed through the
// PodGroup scheduling cycle: FabricTopology generates candidate placements
// (PlacementGenerate) and ranks the ones that fit (PlacementScore). Label
// gangs (scheduler-plugins PodGroups) are scheduled pod by pod: PreFilter
// restricts every member to the gang's domain, Score packs members onto the
// planned nodes, and the Gang plugin keeps it all or nothing.
package fabrictopology

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/metrics"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "FabricTopology"

// Reasons in statuses, events and conditions, for users to grep.
const (
	// ReasonNoDomain: no fabric domain at the allowed levels has room.
	ReasonNoDomain = "NoFabricDomain"
	// ReasonInvalidRequest: a fabric annotation has a bad value.
	ReasonInvalidRequest = "InvalidFabricRequest"
	// ReasonPlaced: the gang is bound.
	ReasonPlaced = "FabricPlaced"
	// ConditionType is the PodGroup condition FabricTopology writes.
	ConditionType = "sluice.dev/FabricPlaced"
)

// FabricTopology is the plugin.
type FabricTopology struct {
	handle    fwk.Handle
	args      *config.FabricTopologyArgs
	tracker   *fabric.Tracker
	gpu       v1.ResourceName
	defaults  gang.FabricRequest
	podGroups *gang.PodGroups
	members   *gang.Members
	reporter  *gang.Reporter
	progress  *progress
	slots     slotCache
}

var (
	_ fwk.PreFilterPlugin         = &FabricTopology{}
	_ fwk.PreScorePlugin          = &FabricTopology{}
	_ fwk.ScorePlugin             = &FabricTopology{}
	_ fwk.PostBindPlugin          = &FabricTopology{}
	_ fwk.PlacementGeneratePlugin = &FabricTopology{}
	_ fwk.PlacementScorePlugin    = &FabricTopology{}
	_ fwk.EnqueueExtensions       = &FabricTopology{}
	_ fwk.SignPlugin              = &FabricTopology{}
)

// New builds the plugin from FabricTopologyArgs.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.FabricTopologyArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type FabricTopologyArgs, got %T", obj)
	}
	if err := validation.ValidateFabricTopologyArgs(validation.ArgsPath(h.ProfileName(), Name), args); err != nil {
		return nil, err
	}
	metrics.Register()
	tracker, err := Tracker(ctx, &args.Fabric, h)
	if err != nil {
		return nil, err
	}
	podGroups, err := gang.SharedPodGroups(ctx, h.ClientSet(), h.KubeConfig())
	if err != nil {
		return nil, err
	}
	reporter, err := gang.NewReporter(ctx, h.ClientSet(), h.KubeConfig(), h.EventRecorder())
	if err != nil {
		return nil, err
	}
	pl := &FabricTopology{
		handle:    h,
		args:      args,
		tracker:   tracker,
		gpu:       v1.ResourceName(args.Fabric.GPUResourceName),
		defaults:  gang.FabricRequest{Level: args.DefaultLevel, Mode: args.DefaultMode},
		podGroups: podGroups,
		members:   gang.NewMembers(h.SharedInformerFactory().Core().V1().Pods().Informer()),
		reporter:  reporter,
		progress:  newProgress(),
	}
	// Forget gangs whose PodGroup is deleted.
	forget := func(api gang.API) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			switch pg := obj.(type) {
			case *schedulingv1beta1.PodGroup:
				pl.forget(gang.Key{API: api, Namespace: pg.Namespace, Name: pg.Name})
			case *v1alpha1.PodGroup:
				pl.forget(gang.Key{API: api, Namespace: pg.Namespace, Name: pg.Name})
			}
		}}
	}
	podGroups.AddEventHandler(forget(gang.Label))
	// Touch the native PodGroup informer only where kube-scheduler watches
	// PodGroups itself: an apiserver without the API would never let it sync.
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		if _, err := h.SharedInformerFactory().Scheduling().V1beta1().PodGroups().Informer().AddEventHandler(forget(gang.Native)); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// Tracker returns the fabric tracker for cfg over the scheduler's node
// informer: one per source, shared by every plugin and profile that reads
// the same fabric.
func Tracker(ctx context.Context, cfg *config.FabricConfig, h fwk.Handle) (*fabric.Tracker, error) {
	source, err := NewSource(cfg)
	if err != nil {
		return nil, err
	}
	return fabric.SharedTracker(ctx, source, h.SharedInformerFactory().Core().V1().Nodes().Informer())
}

// NewSource turns the fabric configuration into a fabric source.
func NewSource(cfg *config.FabricConfig) (fabric.Source, error) {
	levels := make([]string, len(cfg.Levels))
	keys := make([]string, len(cfg.Levels))
	for i, l := range cfg.Levels {
		levels[i], keys[i] = l.Name, l.NodeLabel
	}
	switch cfg.Source {
	case config.FabricSourceNodeLabels:
		return fabric.NewLabelSource(levels, keys)
	case config.FabricSourceSlurmTopology:
		return newSlurmTopologySource(cfg.SlurmTopologyFile, cfg.SlurmNodeNameLabel, levels)
	}
	return nil, fmt.Errorf("fabric source %q is not supported", cfg.Source)
}

// Name returns the plugin name.
func (pl *FabricTopology) Name() string { return Name }

// SignPod refuses gang members: their filtering and scoring depend on where
// the rest of the gang goes, so a cached result of another pod never
// applies. Other pods are signed with no fragment: FabricTopology skips them.
func (pl *FabricTopology) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := gang.KeyOf(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "gang members depend on their gang's placement")
	}
	return nil, nil
}

// EventsToRegister: a gang rejected for lack of room may fit when nodes
// appear or change, or when pods leave.
func (pl *FabricTopology) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}},
	}, nil
}

func (pl *FabricTopology) forget(key gang.Key) {
	pl.progress.forget(key)
	pl.reporter.Forget(key)
}

// levelIndex is the tree level a request may span at most.
func levelIndex(tree *fabric.Tree, req gang.FabricRequest) int {
	if i, ok := tree.LevelIndex(req.Level); ok {
		return i
	}
	return tree.RootLevel()
}
