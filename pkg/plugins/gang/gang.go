// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package gang is the Gang plugin: all-or-nothing scheduling of gangs
// declared with scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1,
// pod label scheduling.x-k8s.io/pod-group), for clusters that do not serve
// the native Workload/PodGroup API. Native gangs are kube-scheduler's own
// GangScheduling plugin's job.
//
// A gang's members stay out of the active queue until minMember of them
// exist (PreEnqueue). Placed members wait at Permit until minMember are
// placed, then all are allowed at once. If the rest do not follow within the
// PodGroup's scheduleTimeoutSeconds, or a member is found unschedulable,
// every waiting member is rejected and its resources are released: nothing
// of a gang binds unless minMember of it do. A rejected gang backs off
// before it is tried again, so competing gangs cannot deadlock each other.
package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "Gang"

// Reasons in statuses and events, for users to grep.
const (
	ReasonWaitingForPodGroup = "WaitingForPodGroup"
	ReasonWaitingForMembers  = "WaitingForMembers"
	ReasonGangRejected       = "GangRejected"
	ReasonMalformedPodGroup  = gang.ReasonMalformedPodGroup
)

// Runtime is what the plugin needs of the scheduler's sluice runtime.
type Runtime interface {
	Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error
	Seal() error
	Gangs() *gang.Gangs
	Reporter(h fwk.Handle) (*gang.Reporter, error)
	// Claims is the store of research claims (nil when no profile runs
	// claims): a gang whose claim has freed its room does not back off.
	Claims() *claims.Store
}

// Gangs is what the plugin reads of gangs (the runtime's *gang.Gangs).
type Gangs interface {
	Get(key gang.Key) (*gang.Gang, error)
	MembersOf(key gang.Key, s gang.Scheduler) (gang.Members, error)
}

// Gang is the plugin.
type Gang struct {
	rt     Runtime
	handle fwk.Handle
	args   *config.GangArgs
	clock  clock.WithDelayedExecution
	// Taken from the runtime when it is sealed (EventsToRegister).
	gangs Gangs
	// served reports whether the cluster serves scheduler-plugins
	// PodGroups (and their informer has synced).
	served    func() bool
	reporter  *gang.Reporter
	scheduler gang.Scheduler

	mu sync.Mutex
	// backoff holds gangs that were rejected as a whole, until when.
	backoff map[gang.Key]time.Time
	// freed reports whether a gang's research claim has freed its room
	// (the claim engine activates its members then): such a gang is
	// tried at once, not after its backoff. Nil: no claims.
	freed func(gang.Key) bool
}

// Gang is not a fwk.SignPlugin and needs not be: the framework signs pods
// only with PreFilter, Filter, PreScore and Score plugins, and Gang has none
// of those, so it does not turn off opportunistic batching.
var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
)

// New returns the plugin's factory over rt.
func New(rt Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.GangArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type GangArgs, got %T", obj)
		}
		path := validation.ArgsPath(h.ProfileName(), Name)
		if err := validation.ValidateGangArgs(path, args); err != nil {
			return nil, err
		}
		if err := rt.Declare(ctx, h, path, config.Facts{}); err != nil {
			return nil, err
		}
		return &Gang{rt: rt, handle: h, args: args, clock: clock.RealClock{}, scheduler: gang.HandleScheduler(h), backoff: map[gang.Key]time.Time{}}, nil
	}
}

// Name returns the plugin name.
func (pl *Gang) Name() string { return Name }

// sealed takes the gangs from the runtime, once, and subscribes to
// PodGroup changes: the scheduler has no informer for this CRD, so they
// reach a gang's members by activating them.
func (pl *Gang) sealed(ctx context.Context) error {
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
	gangs := pl.rt.Gangs()
	podGroups := gangs.LabelPodGroups()
	pl.gangs, pl.served, pl.reporter = gangs, podGroups.Served, reporter
	if store := pl.rt.Claims(); store != nil {
		pl.freed = func(key gang.Key) bool {
			return store.Freed(key.Namespace, claims.NameOf(key.String()))
		}
	}
	logger := klog.FromContext(ctx)
	activate := func(obj any) {
		if pg, ok := obj.(*v1alpha1.PodGroup); ok {
			pl.activate(logger, gang.Key{API: gang.Label, Namespace: pg.Namespace, Name: pg.Name}, "PodGroup changed")
		}
	}
	podGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    activate,
		UpdateFunc: func(_, obj any) { activate(obj) },
	})
	podGroups.OnSynced(func() {
		for _, pg := range podGroups.List() {
			activate(pg)
		}
	})
	return nil
}

// labelGang returns the label gang of a pod.
func labelGang(pod *v1.Pod) (gang.Key, bool) {
	key, ok := gang.KeyOf(pod)
	return key, ok && key.API == gang.Label
}

// PreEnqueue keeps a label gang's members out of the active queue until
// their PodGroup exists and has minMember live members, and while the gang
// backs off after a rejection.
func (pl *Gang) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := labelGang(pod)
	if !ok {
		return nil
	}
	if !pl.served() {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
			"%s: %s PodGroups are not served by this cluster; install manifests/crds", ReasonWaitingForPodGroup, v1alpha1.SchemeGroupVersion))
	}
	g, err := pl.gangs.Get(key)
	var invalid *gang.InvalidError
	switch {
	case errors.Is(err, gang.ErrNotFound):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: PodGroup %s/%s not found", ReasonWaitingForPodGroup, key.Namespace, key.Name))
	case errors.As(err, &invalid) && invalid.Reason == gang.ReasonMalformedPodGroup:
		pl.reporter.Event(g.PodGroup, []*v1.Pod{pod}, v1.EventTypeWarning, invalid.Reason, "Scheduling", invalid.Error())
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, invalid.Reason+": "+invalid.Error())
	case errors.As(err, &invalid):
		// A bad fabric request: FabricTopology tells the user, with an
		// Event on the PodGroup and its pods.
	case err != nil:
		return fwk.AsStatus(err)
	}
	if until, ok := pl.backoffUntil(key); ok && (pl.freed == nil || !pl.freed(key)) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: gang %s/%s backs off until %s after its last rejection",
			ReasonGangRejected, key.Namespace, key.Name, until.Format(time.RFC3339)))
	}
	members, err := pl.gangs.MembersOf(key, pl.scheduler)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if live := len(members.Placed) + len(members.Pending); live < g.MinMember {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: gang %s/%s has %d of its %d members",
			ReasonWaitingForMembers, key.Namespace, key.Name, live, g.MinMember))
	}
	return nil
}

func (pl *Gang) backoffUntil(key gang.Key) (time.Time, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	until, ok := pl.backoff[key]
	if ok && pl.clock.Now().After(until) {
		delete(pl.backoff, key)
		return time.Time{}, false
	}
	return until, ok
}

// EventsToRegister seals the runtime (every plugin is built by now). A
// gang held back for missing members moves when a member is created; one
// that did not fit moves when capacity appears.
func (pl *Gang) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := pl.sealed(ctx); err != nil {
		return nil, err
	}
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: isSiblingAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: isLabelGangMember},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}, QueueingHintFn: isLabelGangMember},
	}, nil
}

// isSiblingAdded queues a pod when a new member of its gang appears.
func isSiblingAdded(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	key, ok := labelGang(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	if other, ok := labelGang(added); ok && other == key {
		logger.V(5).Info("Gang member added", "pod", klog.KObj(pod), "added", klog.KObj(added))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isLabelGangMember queues label gang members on capacity changes: Gang
// rejects (at PostFilter, releasing the gang) only them.
func isLabelGangMember(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if _, ok := labelGang(pod); ok {
		logger.V(5).Info("Capacity changed for a label gang member", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// Reserve does nothing; Unreserve releases the whole gang.
func (pl *Gang) Reserve(context.Context, fwk.CycleState, *v1.Pod, string) *fwk.Status { return nil }

// Unreserve runs when a member is rejected after Reserve (at Permit, on
// timeout, or when binding fails): no member of the gang may keep its
// resources, so every waiting member is rejected too.
func (pl *Gang) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	key, ok := labelGang(pod)
	if !ok {
		return
	}
	pl.rejectGang(ctx, key, fmt.Sprintf("member %s was rejected", pod.Name))
}

// PostFilter runs when a member fits nowhere: the gang cannot complete now,
// so its waiting members release their resources for others (the end of
// any deadlock between competing gangs) and the gang backs off. It returns
// Unschedulable so the next PostFilter (overflow preemption) still runs.
func (pl *Gang) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := labelGang(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pl.rejectGang(ctx, key, fmt.Sprintf("member %s fits nowhere", pod.Name))
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s/%s released its members", key.Namespace, key.Name))
}

// rejectGang rejects every waiting member of a gang and makes it back off.
func (pl *Gang) rejectGang(ctx context.Context, key gang.Key, why string) {
	logger := klog.FromContext(ctx)
	var rejected []*v1.Pod
	pl.scheduler.WaitingPods(func(p *v1.Pod) {
		if k, ok := labelGang(p); ok && k == key {
			rejected = append(rejected, p)
		}
	})
	for _, p := range rejected {
		if wp := pl.handle.GetWaitingPod(p.UID); wp != nil {
			wp.Reject(Name, fmt.Sprintf("%s: gang %s/%s released: %s", ReasonGangRejected, key.Namespace, key.Name, why))
		}
	}
	// The first rejection starts the backoff; rejections of other members
	// during it do not extend it.
	backoff := time.Duration(pl.args.RejectedGangBackoffSeconds) * time.Second
	now := pl.clock.Now()
	pl.mu.Lock()
	until, already := pl.backoff[key]
	if already && now.After(until) {
		already = false
	}
	if backoff > 0 && !already {
		until = now.Add(backoff)
		pl.backoff[key] = until
	}
	pl.mu.Unlock()
	if len(rejected) > 0 || !already {
		logger.V(2).Info("Gang released", "gang", key, "why", why, "waitingMembersRejected", len(rejected), "backoff", backoff)
		if g, err := pl.gangs.Get(key); err == nil && len(rejected) > 0 {
			pl.reporter.Event(g.PodGroup, nil, v1.EventTypeNormal, ReasonGangRejected, "Scheduling",
				fmt.Sprintf("released %d waiting members: %s; retrying in %s", len(rejected), why, backoff))
		}
	}
	if backoff > 0 && !already {
		pl.clock.AfterFunc(until.Sub(now)+100*time.Millisecond, func() { pl.activate(logger, key, "backoff over") })
	}
}

// activate moves a gang's pending members to the active queue.
func (pl *Gang) activate(logger klog.Logger, key gang.Key, why string) {
	members, err := pl.gangs.MembersOf(key, pl.scheduler)
	if err != nil {
		return
	}
	pending := make(map[string]*v1.Pod, len(members.Pending))
	for _, m := range members.Pending {
		pending[m.Namespace+"/"+m.Name] = m
	}
	requeue.Activate(logger, pl.handle, why, pending)
}

// Permit holds a member until minMember members of its gang are placed
// (bound, or waiting here), then allows all of them at once.
func (pl *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := labelGang(pod)
	if !ok {
		return nil, 0
	}
	g, err := pl.gangs.Get(key)
	if errors.Is(err, gang.ErrNotFound) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %v", ReasonWaitingForPodGroup, err)), 0
	}
	var invalid *gang.InvalidError
	if err != nil && !errors.As(err, &invalid) {
		return fwk.AsStatus(err), 0
	}
	members, err := pl.gangs.MembersOf(key, pl.scheduler)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	placed := 1 // this pod
	for _, m := range members.Placed {
		if m.UID != pod.UID {
			placed++
		}
	}
	logger := klog.FromContext(ctx)
	if placed < g.MinMember {
		timeout := g.Timeout(time.Duration(pl.args.DefaultScheduleTimeoutSeconds) * time.Second)
		logger.V(4).Info("Gang member waits for its gang", "pod", klog.KObj(pod), "gang", key, "placed", placed, "minMember", g.MinMember, "timeout", timeout)
		pl.activate(logger, key, "a member waits at Permit")
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("%d of %d members of gang %s/%s placed", placed, g.MinMember, key.Namespace, key.Name)), timeout
	}
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := labelGang(wp.GetPod()); ok && k == key && wp.GetPod().UID != pod.UID {
			wp.Allow(Name)
		}
	})
	logger.V(2).Info("Gang allowed to bind", "gang", key, "placed", placed, "node", nodeName)
	return nil, 0
}
