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
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/capacity"
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
	// ReasonInvalidRequest: a fabric annotation or a native PodGroup's
	// topology constraint has a bad value.
	ReasonInvalidRequest = gang.ReasonInvalidRequest
	// ReasonPlaced: the gang is bound.
	ReasonPlaced = "FabricPlaced"
	// ConditionType is the PodGroup condition FabricTopology writes.
	ConditionType = "sluice.dev/FabricPlaced"
)

// Runtime is what the plugin needs of the scheduler's sluice runtime.
type Runtime interface {
	Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error
	Seal() error
	Fabric() (*fabric.Tracker, *config.FabricConfig)
	Gangs() *gang.Gangs
	External() capacity.External
	Reporter(h fwk.Handle) (*gang.Reporter, error)
}

// FabricTopology is the plugin.
type FabricTopology struct {
	rt     Runtime
	handle fwk.Handle
	// Taken from the runtime when it is sealed (EventsToRegister).
	tracker  *fabric.Tracker
	fabric   *config.FabricConfig
	gpu      v1.ResourceName
	gangs    *gang.Gangs
	external capacity.External
	reporter *gang.Reporter
	progress *progress
	slots    slotCache
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

// New returns the plugin's factory over rt. Its args may state the fabric
// (once in the whole configuration).
func New(rt Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.FabricTopologyArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type FabricTopologyArgs, got %T", obj)
		}
		path := validation.ArgsPath(h.ProfileName(), Name)
		if err := validation.ValidateFabricTopologyArgs(path, args); err != nil {
			return nil, err
		}
		if err := rt.Declare(ctx, h, path, config.Facts{Fabric: args.Fabric}); err != nil {
			return nil, err
		}
		pr := newProgress(h.ProfileName())
		context.AfterFunc(ctx, metrics.SetSampler("gang/"+h.ProfileName(), pr.sample))
		return &FabricTopology{rt: rt, handle: h, progress: pr}, nil
	}
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

// EventsToRegister seals the runtime (every plugin is built by now) and
// takes the fabric, gangs and Slurm view from it. A gang rejected for lack
// of room may fit when nodes appear or change, or when pods leave.
func (pl *FabricTopology) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := pl.sealed(); err != nil {
		return nil, err
	}
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: isGangMember},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isGangMember},
	}, nil
}

// isGangMember queues only gang members: FabricTopology rejects nothing
// else, so no other pod waits on it.
func isGangMember(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := gang.KeyOf(pod); ok {
		logger.V(5).Info("Capacity changed for a gang member", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// sealed takes the shared pieces from the runtime, once.
func (pl *FabricTopology) sealed() error {
	if pl.gangs != nil {
		return nil
	}
	if err := pl.rt.Seal(); err != nil {
		return err
	}
	reporter, err := pl.rt.Reporter(pl.handle)
	if err != nil {
		return err
	}
	pl.tracker, pl.fabric = pl.rt.Fabric()
	pl.gpu = v1.ResourceName(pl.fabric.GPUResourceName)
	pl.gangs, pl.external, pl.reporter = pl.rt.Gangs(), pl.rt.External(), reporter
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
	pl.gangs.LabelPodGroups().AddEventHandler(forget(gang.Label))
	// Touch the native PodGroup informer only where kube-scheduler watches
	// PodGroups itself: an apiserver without the API would never let it sync.
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		if _, err := pl.handle.SharedInformerFactory().Scheduling().V1beta1().PodGroups().Informer().AddEventHandler(forget(gang.Native)); err != nil {
			return err
		}
	}
	return nil
}

// gangOf reads a gang, turning a PodGroup that asks for a placement that
// does not exist into an Event (on the PodGroup and pods), a condition
// and an UnschedulableAndUnresolvable status.
func (pl *FabricTopology) gangOf(key gang.Key, native *schedulingv1beta1.PodGroup, pods []*v1.Pod) (*gang.Gang, *fwk.Status) {
	var g *gang.Gang
	var err error
	if native != nil {
		g, err = pl.gangs.NativeGang(native)
	} else {
		g, err = pl.gangs.Get(key)
	}
	var invalid *gang.InvalidError
	switch {
	case err == nil:
		return g, nil
	case errors.As(err, &invalid):
		msg := invalid.Error()
		if g != nil {
			pl.reporter.Event(g.PodGroup, pods, v1.EventTypeWarning, invalid.Reason, "Scheduling", msg)
		}
		pl.reporter.SetCondition(key, metav1.Condition{Type: ConditionType, Status: metav1.ConditionFalse, Reason: invalid.Reason, Message: msg})
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	case errors.Is(err, gang.ErrNotFound):
		// The Gang plugin holds members back until their PodGroup exists.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return nil, fwk.AsStatus(err)
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
