// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package claims is the claim engine: it carries out research claims on
// physical GPUs. A claim, planned by OverflowPreemption when a research pod
// or gang does not fit, is a ResearchClaim object in the apiserver: the
// production pods to move to overflow nodes (each counted against one
// overflow provider), and where the claimants go. The engine, a controller
// on the replica that holds the controllers' Lease, evicts the victims
// through the Eviction API, each budget (PodDisruptionBudget, or a default
// budget for a controller without one) spent and refilled on its own as
// the victims' own replacements turn Ready on an overflow node; it pauses
// while an overflow node the claim counts on is NotReady or full; it ends
// the claim when the claimants are bound or gone, and gives it up when it
// makes no progress for its timeout. Everything it must not lose is in the
// claim's status, so a new leader resumes where the old one stopped.
package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// Event reasons, for users to grep.
const (
	// ReasonClaiming: on claimants, a claim's progress.
	ReasonClaiming = "ClaimingGPUs"
	// ReasonGivenUp: on claimants, a claim timed out.
	ReasonGivenUp = "ClaimGivenUp"
	// ReasonMoved: on victims, evicted to move to an overflow node.
	ReasonMoved = "MovedToOverflow"
	// ReasonPaused: on claimants, an overflow node the claim counts on
	// is NotReady or full (action ActionWaitOverflow), or no budget allows
	// the next eviction (ActionWaitBudget).
	ReasonPaused = "ClaimPaused"
	// ReasonReplacementTimeout: on victims, the replacement did not turn
	// Ready on an overflow node in time.
	ReasonReplacementTimeout = "ReplacementTimedOut"
	// ReasonDropped: on victims, no longer moved: they stopped being
	// production sluice may move since the claim was planned (opted out,
	// another class, another controller).
	ReasonDropped = "NotMovedAnyMore"
	// ReasonMovedCold: on victims of a make-before-break claim, evicted
	// without a warm instance (it failed, expired, or was not Ready
	// within the warm timeout).
	ReasonMovedCold = "MovedWithoutWarmInstance"
)

// A paused claim's Events differ in their action by what it waits for:
// the events library folds Events of the same reason and action on one
// object into a series that keeps the first note, so a claim that stays
// paused for a new reason would not be seen to.
const (
	ActionWaitOverflow = "WaitForOverflowNode"
	ActionWaitBudget   = "WaitForDisruptionBudget"
	ActionWaitWarm     = "WaitForWarmInstances"
)

// waitingWarm starts the blocker of victims whose warm instance is not
// Ready yet.
const waitingWarm = "warm instances not Ready yet on "

// observeDone records a claim whose work is done: the room it claimed is
// free (or its pods are bound already). Recorded then rather than at the
// last bind, which this engine sees only after the scheduler does.
func observeDone(c *v1alpha1.ResearchClaim, victims int, now time.Time) {
	metrics.ClaimDuration.Observe(now.Sub(c.CreationTimestamp.Time).Seconds())
	metrics.ClaimVictims.Observe(float64(victims))
	metrics.ClaimWaves.Observe(float64(c.Status.Rounds))
}

// resyncPeriod is how often a live claim is looked at without an event
// (its timeouts).
const resyncPeriod = time.Second

// Config is what an engine needs.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Store     *Store
	Classes   *overflow.Classes
	// Ledger says which victims their budgets let go now, counting every
	// actor's disruptions, and evicts them.
	Ledger *disruption.Ledger
	// Recorder records Events on claimants and victims.
	Recorder events.EventRecorder
	// Activate puts pods back in the active queue (the framework's
	// Activate), when their claim freed the room or was given up.
	Activate func(ctx context.Context, pods []*v1.Pod)
	// Conditions writes the claim's progress condition on its PodGroup
	// (nil: not written on PodGroups).
	Conditions ConditionWriter
	// RetryBackoff is how long claimants of a claim given up wait before
	// planning again, doubled per give-up up to eight times.
	RetryBackoff time.Duration
	// Clock drives timeouts (a fake one in tests); nil is the real clock.
	Clock clock.Clock
}

// Engine carries out claims.
type Engine struct {
	cfg    Config
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	byNode cache.Indexer
	// overflowNodes indexes nodes (overflowIndex): a sync reads the
	// overflow nodes, never every node.
	overflowNodes cache.Indexer
	queue         workqueue.TypedRateLimitingInterface[string]
	// synced are the informers the engine reads: it acts only on a full
	// view (an empty pod cache would make every claimant look gone).
	synced []cache.InformerSynced
	// counted is the room of the overflow nodes, pods counted and no
	// reservation held, with the objects it was counted from (room).
	counted struct {
		ledger *overflow.Ledger
		nodes  map[string]*v1.Node
		pods   map[string]sets.Set[*v1.Pod]
	}
}

// nodeIndex indexes pods by the node they are bound to.
const nodeIndex = "sluice.dev/node-name"

// overflowIndex indexes the overflow nodes under "true".
const overflowIndex = "sluice.dev/overflow-node"

// NewEngine builds an engine over cfg's informers, which must not have
// started (it indexes pods by node). Run drives it.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	podInformer := cfg.Informers.Core().V1().Pods().Informer()
	if _, ok := podInformer.GetIndexer().GetIndexers()[nodeIndex]; !ok {
		if err := podInformer.AddIndexers(cache.Indexers{nodeIndex: func(obj any) ([]string, error) {
			if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
				return []string{pod.Spec.NodeName}, nil
			}
			return nil, nil
		}}); err != nil {
			return nil, fmt.Errorf("indexing pods by node: %w", err)
		}
	}
	// The room the claims hold is the ledger's: every actor that places
	// pods on an overflow node (this engine, the planner, the production
	// profile's filter) gets it there.
	cfg.Ledger.HoldRoomOf(cfg.Store)
	nodeInformer := cfg.Informers.Core().V1().Nodes().Informer()
	if _, ok := nodeInformer.GetIndexer().GetIndexers()[overflowIndex]; !ok {
		if err := nodeInformer.AddIndexers(cache.Indexers{overflowIndex: func(obj any) ([]string, error) {
			if n, ok := obj.(*v1.Node); ok && cfg.Classes.IsOverflowNode(n) {
				return []string{"true"}, nil
			}
			return nil, nil
		}}); err != nil {
			return nil, fmt.Errorf("indexing overflow nodes: %w", err)
		}
	}
	return &Engine{
		cfg:           cfg,
		byNode:        podInformer.GetIndexer(),
		overflowNodes: nodeInformer.GetIndexer(),
		pods:          cfg.Informers.Core().V1().Pods().Lister(),
		nodes:         cfg.Informers.Core().V1().Nodes().Lister(),
		synced:        append(disruption.Synced(cfg.Informers), cfg.Informers.Core().V1().Nodes().Informer().HasSynced),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sluice-claims"}),
	}, nil
}

// Run carries out claims until ctx ends: a claim is synced when it
// changes, when a pod, budget or node it reads changes (Store.Watching),
// and every resyncPeriod.
func (e *Engine) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("claims")
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), e.synced...) {
		return
	}
	enqueue := func(obj any) {
		if c, ok := obj.(*v1alpha1.ResearchClaim); ok {
			e.queue.Add(c.Namespace + "/" + c.Name)
		}
	}
	e.cfg.Store.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	all := func(any) {
		for _, c := range e.cfg.Store.List() {
			enqueue(c)
		}
	}
	// A pod, budget or node change syncs only the claims that read it.
	touched := func(obj any) {
		for _, key := range e.cfg.Store.Watching(watchKeys(obj)...) {
			e.queue.Add(key)
		}
	}
	changed := cache.ResourceEventHandlerFuncs{AddFunc: touched, UpdateFunc: func(_, o any) { touched(o) }, DeleteFunc: touched}
	for _, inf := range []cache.SharedIndexInformer{
		e.cfg.Informers.Core().V1().Pods().Informer(), e.cfg.Informers.Policy().V1().PodDisruptionBudgets().Informer(),
		e.cfg.Informers.Core().V1().Nodes().Informer(),
	} {
		reg, err := inf.AddEventHandler(changed)
		if err != nil {
			logger.Error(err, "Claim engine cannot watch")
			return
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
	}
	go wait.UntilWithContext(ctx, func(context.Context) { all(nil) }, resyncPeriod)
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
	logger.Info("Claim engine running")
	for e.processNext(ctx) {
	}
}

// watchKeys are the Store watch keys a pod, PodDisruptionBudget or node
// event touches.
func watchKeys(obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *v1.Pod:
		keys := []string{PodKey(o.UID)}
		if ref := metav1.GetControllerOf(o); ref != nil {
			keys = append(keys, OwnerKey(ref.UID))
		}
		return keys
	case *policyv1.PodDisruptionBudget:
		return []string{BudgetKey("pdb/" + o.Namespace + "/" + o.Name)}
	case *v1.Node:
		return []string{NodeKey(o.Name)}
	}
	return nil
}

func (e *Engine) processNext(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	if err := e.sync(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Claim sync failed; retrying", "claim", key, "err", err)
		e.queue.AddRateLimited(key)
		return true
	}
	e.queue.Forget(key)
	return true
}

// Sync looks at one claim (namespace/name) once: ends it, gives it up,
// pauses it, or evicts what its budgets allow; and writes its status.
// Every step is idempotent: the status records each eviction before it is
// issued, so a retry or a new leader never evicts twice, and tells a
// victim it evicted from one that went away on its own.
func (e *Engine) Sync(ctx context.Context, key string) error { return e.sync(ctx, key) }

func (e *Engine) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	stored, ok := e.cfg.Store.Get(ns, name)
	if !ok {
		return nil
	}
	c := stored.DeepCopy()
	now := e.cfg.Clock.Now()
	records := e.cfg.Store.RecordsOf(stored)
	if !Live(c) {
		if c.Status.RetryAfter != nil && !now.Before(c.Status.RetryAfter.Time) {
			return e.cfg.Store.Delete(ctx, c.Namespace, c.Name)
		}
		return nil
	}
	if c.Status.ProgressTime.IsZero() {
		c.Status.ProgressTime = c.CreationTimestamp
		if c.Status.ProgressTime.IsZero() {
			c.Status.ProgressTime = metav1.NewTime(now)
		}
	}

	claimants, bound := e.claimants(c)
	st := e.look(c, now)
	if st.progressed {
		c.Status.ProgressTime = metav1.NewTime(now)
	}
	// The claimants gone, or all bound, end the claim: nothing more is
	// evicted, and it ends once the victims evicted have their
	// replacements placed (until then their overflow room stays held).
	if len(claimants) == 0 || bound == len(c.Spec.Claimants) {
		return e.settle(ctx, stored, c, records, claimants, bound, st, now)
	}
	// A claim is given up whole: when one of its records is, or when
	// none has moved forward for the timeout.
	if other := givenUpRecord(records, c); other != nil {
		return e.giveUp(ctx, c, stored, records, claimants, st, now, other)
	}
	if now.Sub(progressOf(records, c)) > time.Duration(c.Spec.TimeoutSeconds)*time.Second {
		return e.giveUp(ctx, c, stored, records, claimants, st, now, nil)
	}

	// Before any eviction: every overflow provider the claim counts on
	// must still hold what is counted against it.
	// cause is why a paused claim waits; a new cause is told in an Event.
	phase, message, cause, action := v1alpha1.PhaseEvicting, "", "", ""
	if len(st.pending) > 0 {
		room := e.room()
		for _, v := range st.pending {
			if ok, why := room.Holds(overflow.Target{Node: v.Target.Node, Provider: v.Target.Provider}); !ok {
				phase, message, cause, action = v1alpha1.PhasePaused, "paused: "+why, why, ActionWaitOverflow
				break
			}
		}
	}
	evicted := 0
	if phase == v1alpha1.PhaseEvicting {
		var err error
		if evicted, stored, err = e.evict(ctx, stored, c, st, now); err != nil {
			return err
		}
		if evicted > 0 {
			c.Status.ProgressTime = metav1.NewTime(now)
		}
	}
	pending := len(st.pending) - evicted
	switch {
	case pending == 0 && st.inFlight == 0 && evicted == 0:
		phase = v1alpha1.PhaseFreed
		message = fmt.Sprintf("%d production pods moved; %d of %d research pods bound", len(c.Spec.Victims), bound, len(c.Spec.Claimants))
	case message == "":
		message = fmt.Sprintf("%d of %d production pods moved, %d moving, %d to go", len(c.Status.Replaced), len(c.Spec.Victims), st.inFlight+evicted, pending)
		if len(st.blocked) > 0 {
			cause, action = st.blocked.String(c.Namespace), ActionWaitBudget
			if st.blocked.only(waitingWarm) {
				action = ActionWaitWarm
			}
			message += "; waiting for " + cause
			if evicted == 0 {
				phase = v1alpha1.PhasePaused
			}
		}
	}
	// Told when the claim pauses, and again when it stays paused for
	// another reason (a budget, then the overflow node NotReady).
	pausedNow := phase == v1alpha1.PhasePaused &&
		(stored.Status.Phase != v1alpha1.PhasePaused || !strings.Contains(stored.Status.Message, cause))
	c.Status.Phase, c.Status.Message = phase, message
	if err := e.writeStatus(ctx, stored, c); err != nil {
		return err
	}
	// What the claimants see is the whole claim (all its records).
	before, after := view(records, stored), view(records, c)
	freedNow := after.Status.Phase == v1alpha1.PhaseFreed && before.Status.Phase != v1alpha1.PhaseFreed
	if after.Status.Phase != before.Status.Phase || after.Status.Message != before.Status.Message {
		e.report(ctx, after, claimants)
	}
	if pausedNow && e.cfg.Recorder != nil {
		for _, p := range claimants {
			e.cfg.Recorder.Eventf(p, nil, v1.EventTypeWarning, ReasonPaused, action, "%s", note("claim of "+c.Spec.Domain+" "+message))
		}
	}
	if freedNow {
		observeDone(c, victimsOf(records, c), now)
	}
	if freedNow && e.cfg.Activate != nil {
		// The room is free: retry the claimants now rather than when
		// some unrelated event or the periodic flush requeues them.
		e.cfg.Activate(ctx, claimants)
	}
	return nil
}

// settle ends a claim whose claimants are all bound or gone: the victims
// not evicted stay where they are, and the claim is deleted once every
// victim evicted has its replacement placed (or timed out); until then it
// holds their overflow room, so the next plan does not count it free.
// Each record is deleted on its own once its replacements are placed; the
// first, which owns the others, last.
func (e *Engine) settle(ctx context.Context, stored, c *v1alpha1.ResearchClaim, records []*v1alpha1.ResearchClaim, claimants []*v1.Pod, bound int, st state, now time.Time) error {
	key := c.Namespace + "/" + c.Name
	for _, v := range st.pending {
		c.Status.Replaced = append(c.Status.Replaced, v.UID)
	}
	c.Status.Evicting = nil
	var why string
	if len(claimants) == 0 {
		why = "its research pods are gone"
	} else {
		why = fmt.Sprintf("its research pods are bound; %d of %d production pods moved", len(c.Status.Evicted), len(c.Spec.Victims))
	}
	if st.inFlight > 0 {
		c.Status.Phase = v1alpha1.PhaseFreed
		c.Status.Message = fmt.Sprintf("%s; %d replacements not placed yet hold their overflow room", why, st.inFlight)
		if err := e.writeStatus(ctx, stored, c); err != nil {
			return err
		}
		if stored.Status.Phase != v1alpha1.PhaseFreed && len(claimants) > 0 && First(c) {
			observeDone(c, victimsOf(records, c), now)
			e.report(ctx, view(records, c), claimants)
		}
		return nil
	}
	if !First(c) {
		klog.FromContext(ctx).V(4).Info("Claim record done", "claim", key)
		return e.cfg.Store.Delete(ctx, c.Namespace, c.Name)
	}
	if others := len(records) - 1; others > 0 {
		c.Status.Phase = v1alpha1.PhaseFreed
		c.Status.Message = fmt.Sprintf("%s; waiting for %d more records of the claim to end", why, others)
		if err := e.writeStatus(ctx, stored, c); err != nil {
			return err
		}
		if stored.Status.Phase != v1alpha1.PhaseFreed && len(claimants) > 0 {
			observeDone(c, victimsOf(records, c), now)
			e.report(ctx, view(records, c), claimants)
		}
		return nil
	}
	if len(claimants) == 0 {
		klog.FromContext(ctx).V(2).Info("Claim dropped: its pods are gone", "claim", key)
		e.reportEnd(ctx, c, nil, why)
		return e.cfg.Store.Delete(ctx, c.Namespace, c.Name)
	}
	if stored.Status.Phase != v1alpha1.PhaseFreed {
		observeDone(c, victimsOf(records, c), now) // bound before this replica saw the room free
		e.reportEnd(ctx, c, claimants, why)
	}
	klog.FromContext(ctx).V(2).Info("Claim done: its pods are bound", "claim", key, "victims", len(c.Spec.Victims))
	return e.cfg.Store.Delete(ctx, c.Namespace, c.Name)
}

// claimants are the claim's research pods that still exist (by UID) and
// are still research (their namespace in the research namespaces), and
// how many of them are bound.
func (e *Engine) claimants(c *v1alpha1.ResearchClaim) ([]*v1.Pod, int) {
	var out []*v1.Pod
	bound := 0
	for _, cl := range c.Spec.Claimants {
		p, err := e.pods.Pods(c.Namespace).Get(cl.Name)
		// A claimant whose namespace left the research namespaces is
		// gone for its claim: nothing more is evicted for it.
		if err != nil || p.UID != cl.UID || p.DeletionTimestamp != nil || e.cfg.Classes.LeftResearch(p) {
			continue
		}
		out = append(out, p)
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return out, bound
}

// state is what a look at a claim's victims found.
type state struct {
	// pending are the victims not yet evicted, in order, with their pods.
	pending []v1alpha1.Victim
	pods    map[types.UID]*v1.Pod
	// recorded are the pending victims whose eviction the status records
	// as issued (a leader stopped before it saw the answer).
	recorded sets.Set[types.UID]
	// inFlight counts evicted victims whose replacement is not placed.
	inFlight int
	// blocked says why pending victims were not evicted now.
	blocked    blockers
	progressed bool
}

// look updates the claim's record of evicted and replaced victims and
// finds what is pending and in flight. A victim is replaced once a pod of
// its controller created since the claim began (both times the
// apiserver's) is bound off the nodes the claim holds: from then that pod
// counts on its node, so the victim's reservation goes. Whether it is
// Ready is its budget's business (the ledger's), not the claim's.
func (e *Engine) look(c *v1alpha1.ResearchClaim, now time.Time) state {
	st := state{pods: map[types.UID]*v1.Pod{}, recorded: sets.New[types.UID](), blocked: blockers{}}
	evictedAt := map[types.UID]metav1.Time{}
	for _, ev := range c.Status.Evicted {
		evictedAt[ev.UID] = ev.Time
	}
	replaced := sets.New(c.Status.Replaced...)
	replace := func(uid types.UID) {
		if !replaced.Has(uid) {
			replaced.Insert(uid)
			c.Status.Replaced = append(c.Status.Replaced, uid)
			st.progressed = true
		}
	}
	// Evictions issued: those whose pod is going or gone are done; the
	// others did not happen (or were cut off) and are pending again.
	issued := sets.New(c.Status.Evicting...)
	c.Status.Evicting = nil
	for _, v := range c.Spec.Victims {
		if !issued.Has(v.UID) || replaced.Has(v.UID) {
			continue
		}
		if _, ok := evictedAt[v.UID]; ok {
			continue
		}
		p, err := e.pods.Pods(v.Namespace).Get(v.Name)
		if err == nil && p.UID == v.UID && p.DeletionTimestamp == nil {
			c.Status.Evicting = append(c.Status.Evicting, v.UID)
			st.recorded.Insert(v.UID)
			continue
		}
		evictedAt[v.UID] = metav1.NewTime(now)
		c.Status.Evicted = append(c.Status.Evicted, v1alpha1.Eviction{UID: v.UID, Time: evictedAt[v.UID]})
		st.progressed = true
	}
	used := sets.New(c.Status.Replacements...)
	victims := sets.New[types.UID]()
	for _, v := range c.Spec.Victims {
		victims.Insert(v.UID)
	}
	timeout := time.Duration(c.Spec.ReplacementTimeoutSeconds) * time.Second
	held := heldNodes(c)
	for _, v := range c.Spec.Victims {
		at, ok := evictedAt[v.UID]
		if !ok || replaced.Has(v.UID) {
			continue
		}
		if r := e.replacement(c, v, used, victims, held); r != "" {
			used.Insert(r)
			c.Status.Replacements = append(c.Status.Replacements, r)
			replace(v.UID)
			continue
		}
		if timeout > 0 && now.Sub(at.Time) > timeout {
			if e.cfg.Recorder != nil {
				ref := &v1.ObjectReference{Kind: "Pod", Namespace: v.Namespace, Name: v.Name, UID: v.UID, APIVersion: "v1"}
				e.cfg.Recorder.Eventf(ref, nil, v1.EventTypeWarning, ReasonReplacementTimeout, "Preempting",
					"no replacement of %s %s placed %s after its eviction; the overflow room is no longer held for it", v.Owner.Kind, v.Owner.Name, timeout)
			}
			replace(v.UID)
			continue
		}
		st.inFlight++
	}
	for _, v := range c.Spec.Victims {
		if replaced.Has(v.UID) {
			continue
		}
		if _, ok := evictedAt[v.UID]; ok {
			continue
		}
		p, err := e.pods.Pods(v.Namespace).Get(v.Name)
		if err != nil || p.UID != v.UID || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			// Gone before any eviction of ours (deleted, scaled down):
			// nothing to move.
			replace(v.UID)
			continue
		}
		if p.DeletionTimestamp != nil {
			// Being deleted by someone else: its replacement needs its
			// room all the same.
			c.Status.Evicted = append(c.Status.Evicted, v1alpha1.Eviction{UID: v.UID, Time: metav1.NewTime(now)})
			st.progressed = true
			st.inFlight++
			continue
		}
		if why := e.notMovable(p, v); why != "" {
			// Checked again before every eviction: the pod may have
			// changed since the claim was planned.
			if e.cfg.Recorder != nil {
				e.cfg.Recorder.Eventf(p, nil, v1.EventTypeNormal, ReasonDropped, "Preempting", "not moved for %s after all: %s", researchFor(p, c), why)
			}
			replace(v.UID)
			continue
		}
		st.pending = append(st.pending, v)
		st.pods[v.UID] = p
	}
	return st
}

// notMovable says why victim v, as its pod p is now, may no longer be
// moved ("" when it may): it opted out of overflow, stopped being
// overflow-eligible production, or has another controller.
func (e *Engine) notMovable(p *v1.Pod, v v1alpha1.Victim) string {
	if overflow.OptedOut(p) {
		return "it opted out of overflow (" + overflow.Annotation + ": " + p.Annotations[overflow.Annotation] + ")"
	}
	if setting := e.cfg.Classes.Refused(p); setting != "" {
		return "namespace " + p.Namespace + " is no longer in " + setting
	}
	if p.Spec.NodeName != v.Node {
		return "it is no longer on " + v.Node
	}
	if !e.cfg.Classes.Eligible(p) {
		return "it is no longer production that may run on an overflow node (its priority class or tolerations changed)"
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != v.Owner.UID {
		return "its controller is no longer " + v.Owner.Kind + " " + v.Owner.Name
	}
	return ""
}

// researchFor names claim c's research to pod: by its key to its own
// namespace, as "research" to another's.
func researchFor(pod *v1.Pod, c *v1alpha1.ResearchClaim) string {
	if pod.Namespace == c.Namespace {
		return c.Spec.Key
	}
	return "research"
}

// replacement finds a pod replacing victim v of claim c: a pod of its
// controller created since the claim began, not a victim, not being
// deleted, bound to an existing node the claim does not hold, and not yet
// matched; "" when none.
func (e *Engine) replacement(c *v1alpha1.ResearchClaim, v v1alpha1.Victim, used, victims sets.Set[types.UID], held sets.Set[string]) types.UID {
	var best *v1.Pod
	for _, p := range e.cfg.Ledger.PodsOf(string(v.Owner.UID)) {
		if used.Has(p.UID) || victims.Has(p.UID) || p.Namespace != v.Namespace || p.DeletionTimestamp != nil ||
			p.CreationTimestamp.Before(&c.CreationTimestamp) || p.Spec.NodeName == "" || held.Has(p.Spec.NodeName) {
			continue
		}
		if _, err := e.nodes.Get(p.Spec.NodeName); err != nil {
			continue
		}
		if best == nil || p.CreationTimestamp.Before(&best.CreationTimestamp) {
			best = p
		}
	}
	if best == nil {
		return ""
	}
	return best.UID
}

// heldNodes are the nodes a claim frees or nominates its claimants to.
func heldNodes(c *v1alpha1.ResearchClaim) sets.Set[string] {
	held := sets.New[string]()
	for _, v := range c.Spec.Victims {
		held.Insert(v.Node)
	}
	for _, cl := range c.Spec.Claimants {
		held.Insert(cl.Node)
	}
	return held
}

// room is the overflow room now, every live claim's reservations held.
// The count of the pods on the overflow nodes is kept while neither the
// nodes nor their pods change (the informers' objects are the same): a
// claim's records look at it once each, and an overflow node may run
// tens of thousands of pods.
func (e *Engine) room() *overflow.Ledger {
	all, _ := e.overflowNodes.ByIndex(overflowIndex, "true")
	var nodes []*v1.Node
	pods := map[string][]*v1.Pod{}
	same := e.counted.ledger != nil
	for _, obj := range all {
		n, ok := obj.(*v1.Node)
		if !ok {
			continue
		}
		nodes = append(nodes, n)
		pods[n.Name] = e.podsOn(n.Name)
		same = same && e.counted.nodes[n.Name] == n && samePods(e.counted.pods[n.Name], pods[n.Name])
	}
	if !same || len(nodes) != len(e.counted.nodes) {
		counted := overflow.NewLedger(e.cfg.Classes, nodes, func(n string) []*v1.Pod { return pods[n] }, nil)
		e.counted.ledger, e.counted.nodes, e.counted.pods = counted, map[string]*v1.Node{}, map[string]sets.Set[*v1.Pod]{}
		for _, n := range nodes {
			e.counted.nodes[n.Name] = n
			e.counted.pods[n.Name] = sets.New(pods[n.Name]...)
		}
	}
	return e.cfg.Ledger.Room(e.counted.ledger)
}

// samePods reports whether pods are the objects counted.
func samePods(counted sets.Set[*v1.Pod], pods []*v1.Pod) bool {
	if len(counted) != len(pods) {
		return false
	}
	for _, p := range pods {
		if !counted.Has(p) {
			return false
		}
	}
	return true
}

func (e *Engine) podsOn(node string) []*v1.Pod {
	objs, _ := e.byNode.ByIndex(nodeIndex, node)
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// evict evicts the pending victims their budgets allow now, in order, as
// the disruption ledger counts them (every claim's and every return's
// disruptions). Before it evicts, it records in c's status which victims
// it is about to evict (so a new leader tells them from pods that went on
// their own, and may finish an eviction cut off midway); after, which it
// evicted. It returns how many, and the claim as last written.
func (e *Engine) evict(ctx context.Context, stored, c *v1alpha1.ResearchClaim, st state, now time.Time) (int, *v1alpha1.ResearchClaim, error) {
	logger := klog.FromContext(ctx)
	type move struct {
		v   v1alpha1.Victim
		mv  *disruption.Move
		why string // moved without a warm instance
	}
	var moves []move
	// Whether each target node warms, read once a pass (thousands of
	// victims share a few overflow nodes).
	warms := map[string]bool{}
	for _, v := range st.pending {
		pod := st.pods[v.UID]
		w, ok := warms[v.Target.Node]
		if !ok {
			w = e.warms(v.Target.Node)
			warms[v.Target.Node] = w
		}
		cold, wait := warmth(c, pod, w, now)
		if wait {
			st.blocked.add(waitingWarm+v.Target.Node, "", v)
			continue
		}
		budget, why := e.cfg.Ledger.Of(pod)
		if why != "" {
			st.blocked.add(why, "waiting for a disruption budget of another namespace", v)
			continue
		}
		mv, why := e.cfg.Ledger.Reserve(pod, budget, st.recorded.Has(v.UID))
		if why != "" {
			st.blocked.add(why, "waiting for a disruption budget of another namespace", v)
			continue
		}
		moves = append(moves, move{v: v, mv: mv, why: cold})
	}
	if len(moves) == 0 {
		return 0, stored, nil
	}
	issued := sets.New(c.Status.Evicting...)
	for _, m := range moves {
		if !issued.Has(m.v.UID) {
			c.Status.Evicting = append(c.Status.Evicting, m.v.UID)
		}
	}
	written, err := e.cfg.Store.UpdateStatus(ctx, c)
	if err != nil {
		for _, m := range moves {
			m.mv.Release()
		}
		return 0, stored, fmt.Errorf("recording the evictions about to be issued: %w", err)
	}
	c.ResourceVersion = written.ResourceVersion
	done := sets.New[types.UID]()
	evicted := 0
	for _, m := range moves {
		v, pod := m.v, st.pods[m.v.UID]
		note := fmt.Sprintf("moving to an overflow node so %s gets %s (%s)", researchFor(pod, c), c.Spec.Domain, c.Spec.Note)
		ok, err := m.mv.Evict(ctx, disruption.MovePreemption, note)
		switch {
		case err != nil:
			// Left recorded: it may have gone through; the next look
			// tells from the pod.
			logger.V(2).Info("Eviction failed", "claim", c.Spec.Key, "pod", klog.KObj(pod), "err", err)
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			st.blocked.add("evictions failing: "+err.Error(), "evictions failing in another namespace", v)
		case !ok:
			// 429: the apiserver's view of the budget allows nothing.
			done.Insert(v.UID)
			st.blocked.add("the Eviction API refuses (429) under "+m.mv.Budget.String(), "the Eviction API refuses (429) under a budget of another namespace", v)
		default:
			done.Insert(v.UID)
			evicted++
			c.Status.Evicted = append(c.Status.Evicted, v1alpha1.Eviction{UID: v.UID, Time: metav1.NewTime(now)})
			if m.why != "" && e.cfg.Recorder != nil {
				e.cfg.Recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonMovedCold, "Preempting", "evicted without a warm instance on %s: %s", v.Target.Node, m.why)
			}
		}
	}
	c.Status.Evicting = slices.DeleteFunc(c.Status.Evicting, done.Has)
	if evicted > 0 {
		c.Status.Rounds++
		metrics.OverflowWaves.WithLabelValues(disruption.MovePreemption).Inc()
		logger.V(2).Info("Evicted for claim", "claim", c.Spec.Key, "evicted", evicted, "pending", len(st.pending)-evicted)
	}
	return evicted, written, nil
}

// warms reports whether overflow node name starts warm instances (its
// offer says so).
func (e *Engine) warms(name string) bool {
	n, err := e.nodes.Get(name)
	if err != nil {
		return false
	}
	o, err := offer.Of(n, true)
	return err == nil && o.Warm
}

// warmth decides, for a victim of claim c whose target node warms (or
// not), whether it waits for its warm instance (wait), or moves without
// one and why (cold, "" when it has one or the claim is
// break-before-make).
func warmth(c *v1alpha1.ResearchClaim, pod *v1.Pod, warms bool, now time.Time) (cold string, wait bool) {
	if !c.Spec.MakeBeforeBreak {
		return "", false
	}
	if !warms {
		// Not sluice's overflow node, or one older than
		// make-before-break: nothing would ever warm it.
		return "", false
	}
	ready, final, msg, _ := offer.Warm(pod)
	timeout := time.Duration(c.Spec.WarmTimeoutSeconds) * time.Second
	switch {
	case ready:
		return "", false
	case final:
		return msg, false
	case now.Sub(c.CreationTimestamp.Time) >= timeout:
		if msg == "" {
			msg = "the overflow node never reported one"
		}
		return fmt.Sprintf("not Ready %s after the claim began (%s)", timeout, msg), false
	}
	return "", true
}

// blockers are the reasons victims wait, each with its victims. What a
// claim says goes to its research namespace, which must not learn other
// tenants' objects: a reason is said there only when all its victims are
// that namespace's own, otherwise its elsewhere text is; victims of other
// namespaces are counted, never named.
type blockers map[string]*blocker

type blocker struct {
	elsewhere string
	victims   []v1alpha1.Victim
}

// only reports whether every reason starts with prefix.
func (b blockers) only(prefix string) bool {
	for why := range b {
		if !strings.HasPrefix(why, prefix) {
			return false
		}
	}
	return len(b) > 0
}

// add records that v waits for why; elsewhere says the same without
// naming anything of v's namespace ("" when why names nothing of it).
func (b blockers) add(why, elsewhere string, v v1alpha1.Victim) {
	r := b[why]
	if r == nil {
		r = &blocker{elsewhere: elsewhere}
		b[why] = r
	}
	r.victims = append(r.victims, v)
}

// maxReasons is how many reasons blockers.String names; the rest are
// counted, so a claim held by many budgets still fits an Event's note.
const maxReasons = 3

// String says, to namespace viewer, the first maxReasons reasons (by the
// victims they hold, most first), each with how many victims and the
// first few of the viewer's own, and counts the rest.
func (b blockers) String(viewer string) string {
	type said struct {
		own   []string
		other int
	}
	byReason := map[string]*said{}
	for why, r := range b {
		own := true
		for _, v := range r.victims {
			own = own && v.Namespace == viewer
		}
		if !own && r.elsewhere != "" {
			why = r.elsewhere
		}
		s := byReason[why]
		if s == nil {
			s = &said{}
			byReason[why] = s
		}
		for _, v := range r.victims {
			if v.Namespace == viewer {
				s.own = append(s.own, v.Name)
			} else {
				s.other++
			}
		}
	}
	count := func(s *said) int { return len(s.own) + s.other }
	reasons := make([]string, 0, len(byReason))
	for why := range byReason {
		reasons = append(reasons, why)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if ci, cj := count(byReason[reasons[i]]), count(byReason[reasons[j]]); ci != cj {
			return ci > cj
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, maxReasons+1)
	for _, why := range reasons[:min(len(reasons), maxReasons)] {
		s := byReason[why]
		slices.Sort(s.own)
		names := s.own[:min(len(s.own), 3)]
		if more := len(s.own) - len(names); more > 0 {
			names = append(slices.Clone(names), fmt.Sprintf("%d more", more))
		}
		if s.other > 0 {
			names = append(slices.Clone(names), fmt.Sprintf("%d of other namespaces", s.other))
		}
		parts = append(parts, fmt.Sprintf("%s (%d pods: %s)", why, count(s), strings.Join(names, ", ")))
	}
	if rest := len(reasons) - maxReasons; rest > 0 {
		pods := 0
		for _, why := range reasons[maxReasons:] {
			pods += count(byReason[why])
		}
		parts = append(parts, fmt.Sprintf("and %d more reasons (%d pods)", rest, pods))
	}
	return strings.Join(parts, "; ")
}

// maxNote is the longest Event note the engine writes: the events API
// refuses notes over 1,024 bytes, and the Event with them.
const maxNote = 1000

// note cuts an Event's note to maxNote bytes, at a character boundary.
func note(s string) string {
	if len(s) <= maxNote {
		return s
	}
	cut := maxNote - len(" [cut]")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [cut]"
}

// writeStatus writes c's status if it changed from stored's.
func (e *Engine) writeStatus(ctx context.Context, stored, c *v1alpha1.ResearchClaim) error {
	if statusEqual(stored.Status, c.Status) {
		return nil
	}
	_, err := e.cfg.Store.UpdateStatus(ctx, c)
	return err
}

func statusEqual(a, b v1alpha1.ResearchClaimStatus) bool {
	return a.Phase == b.Phase && a.Message == b.Message && len(a.Evicted) == len(b.Evicted) && slices.Equal(a.Evicting, b.Evicting) &&
		len(a.Replaced) == len(b.Replaced) && a.ProgressTime.Equal(&b.ProgressTime) && a.Attempts == b.Attempts
}

// giveUp ends a claim that made no progress for its timeout: nothing more
// is evicted, the claimants are told why in numbers and requeued (their
// nominations go), and they plan no new claim before the backoff ends.
// A record whose claim another record gave up (follow) ends the same way,
// told once already.
func (e *Engine) giveUp(ctx context.Context, c, stored *v1alpha1.ResearchClaim, records []*v1alpha1.ResearchClaim, claimants []*v1.Pod, st state, now time.Time, follow *v1alpha1.ResearchClaim) error {
	if follow != nil {
		c.Status.Phase, c.Status.RetryAfter, c.Status.Attempts = v1alpha1.PhaseGivenUp, follow.Status.RetryAfter, follow.Status.Attempts
		c.Status.Message = fmt.Sprintf("given up with %s: %s", follow.Name, follow.Status.Message)
		_, err := e.cfg.Store.UpdateStatus(ctx, c)
		return err
	}
	timeout := time.Duration(c.Spec.TimeoutSeconds) * time.Second
	why := fmt.Sprintf("gave up freeing %s after %s without progress: %d of %d production pods moved, %d moving, %d not evicted",
		c.Spec.Domain, timeout, len(c.Status.Replaced), len(c.Spec.Victims), st.inFlight, len(st.pending))
	if n := c.Spec.Records; n > 1 {
		why = fmt.Sprintf("%s (record %d of %d)", why, c.RecordIndex(), n)
	}
	if len(st.blocked) > 0 {
		why += "; blocked by " + st.blocked.String(c.Namespace)
	} else if c.Status.Message != "" {
		why += "; last: " + c.Status.Message
	}
	if c.Status.Attempts == 0 {
		// A new claim's status starts empty: the claims given up before
		// it are counted on it by its planner.
		if n, err := strconv.ParseInt(c.Annotations[AttemptsAnnotation], 10, 32); err == nil && n > 0 {
			c.Status.Attempts = int32(n)
		}
	}
	backoff := e.cfg.RetryBackoff << min(c.Status.Attempts, 3)
	backoff = min(backoff, 10*e.cfg.RetryBackoff)
	retry := metav1.NewTime(now.Add(backoff))
	c.Status.Phase, c.Status.Message, c.Status.RetryAfter = v1alpha1.PhaseGivenUp, why, &retry
	c.Status.Attempts++
	klog.FromContext(ctx).Info("Research claim given up", "claim", c.Spec.Key, "why", why, "retryAfter", retry.Time)
	if _, err := e.cfg.Store.UpdateStatus(ctx, c); err != nil {
		return err
	}
	whole := view(records, c)
	e.report(ctx, whole, claimants)
	if e.cfg.Recorder != nil {
		msg := note(fmt.Sprintf("no new claim before %s: %s", retry.Format(time.RFC3339), why))
		for _, p := range claimants {
			e.cfg.Recorder.Eventf(p, nil, v1.EventTypeWarning, ReasonGivenUp, "Preempting", "%s", msg)
		}
		for _, ref := range whole.OwnerReferences {
			if ref.Kind == "PodGroup" {
				e.cfg.Recorder.Eventf(&v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: c.Namespace, Name: ref.Name, UID: ref.UID},
					nil, v1.EventTypeWarning, ReasonGivenUp, "Preempting", "%s", msg)
			}
		}
	}
	if e.cfg.Activate != nil {
		e.cfg.Activate(ctx, claimants)
	}
	return nil
}
