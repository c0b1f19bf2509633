// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package invariants watches what sluice promises about research claims,
// on every event an informer delivers (not at the moments a poll happens
// to look), for the integration tests and the demo:
//
//   - no eviction ever leaves a PodDisruptionBudget with fewer healthy
//     pods than it requires (from its spec, against its pods'
//     controllers' replicas: the check holds with the disruption
//     controller down too), selecting as policy/v1 does (an empty
//     selector selects every pod of its namespace); and no eviction of a
//     pod no PDB selects leaves its controller with fewer healthy pods
//     than sluice's default budget requires (replicas less
//     DefaultMaxUnavailable of them, at least 1);
//   - no research pod is ever evicted, and no pod without a controller
//     (nothing would recreate it);
//   - production is never evicted beyond the overflow room: the GPUs of
//     production pods on overflow nodes plus those of production pods
//     waiting to be placed never exceed the room;
//   - at rest, no gang is partly bound (Gangs).
//
// An eviction is seen as the DisruptionTarget condition the Eviction API
// sets on a pod before deleting it.
package invariants

import (
	"context"
	"fmt"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/disruption"
)

// Options say what the watcher checks against.
type Options struct {
	// Namespace is watched ("" for all).
	Namespace string
	// OverflowGPUs is the overflow room, in GPUs of GPUResource; 0 turns
	// the room check off.
	OverflowGPUs int64
	GPUResource  v1.ResourceName
	// IsOverflowNode tells overflow nodes by name.
	IsOverflowNode func(node string) bool
	// Research and Production are the priority classes.
	Research, Production string
	// DefaultMaxUnavailable is sluice's default budget for a controller
	// without a PodDisruptionBudget (nil: 25%, sluice's default).
	DefaultMaxUnavailable *intstr.IntOrString
}

// Watcher records violations until its context ends.
type Watcher struct {
	opts    Options
	pods    cache.Indexer
	pdbs    cache.Indexer
	rss     cache.Indexer
	sts     cache.Indexer
	mu      sync.Mutex
	armed   bool
	seen    map[string]bool // violations, deduplicated
	list    []string
	evicted map[string]int // evictions seen, by class ("research", "production", "bare", "other")
	peak    int64          // most production GPUs ever on overflow or waiting
	// overdrafts counts evictions that left a budget short.
	overdrafts int
}

// Start watches until ctx ends; it returns once the informers have synced.
// Nothing is checked before Arm (a test's own set-up creates pods that
// are not yet Ready or placed).
func Start(ctx context.Context, cs kubernetes.Interface, opts Options) (*Watcher, error) {
	if opts.GPUResource == "" {
		opts.GPUResource = "nvidia.com/gpu"
	}
	if opts.Research == "" {
		opts.Research, opts.Production = "research", "production"
	}
	if opts.DefaultMaxUnavailable == nil {
		quarter := intstr.FromString("25%")
		opts.DefaultMaxUnavailable = &quarter
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(opts.Namespace))
	w := &Watcher{opts: opts, seen: map[string]bool{}, evicted: map[string]int{}}
	podInf := factory.Core().V1().Pods().Informer()
	pdbInf := factory.Policy().V1().PodDisruptionBudgets().Informer()
	rsInf := factory.Apps().V1().ReplicaSets().Informer()
	stsInf := factory.Apps().V1().StatefulSets().Informer()
	w.pods, w.pdbs, w.rss, w.sts = podInf.GetIndexer(), pdbInf.GetIndexer(), rsInf.GetIndexer(), stsInf.GetIndexer()
	var regs []cache.ResourceEventHandlerRegistration
	for _, inf := range []cache.SharedIndexInformer{podInf, pdbInf, rsInf, stsInf} {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.event(nil, obj) },
			UpdateFunc: func(o, n any) { w.event(o, n) },
			DeleteFunc: func(obj any) { w.event(obj, nil) },
		})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
	}
	factory.Start(ctx.Done())
	for _, r := range regs {
		if !cache.WaitForCacheSync(ctx.Done(), r.HasSynced) {
			return nil, fmt.Errorf("invariant watch did not sync")
		}
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return w, nil
}

// Arm starts checking, from a state the caller knows to be at rest.
func (w *Watcher) Arm() {
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
	w.event(nil, nil)
}

// Violations are what was seen so far, in order.
func (w *Watcher) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// Evictions counts the evictions seen, by what was evicted: "research",
// "production", "bare" (no controller) and "other".
func (w *Watcher) Evictions() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.evicted))
	for k, v := range w.evicted {
		out[k] = v
	}
	return out
}

// Overdrafts counts the evictions that left a budget (a
// PodDisruptionBudget, or the default budget of a controller without one)
// with fewer healthy pods than it requires, since Arm.
func (w *Watcher) Overdrafts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overdrafts
}

// PeakOverflowGPUs is the most production GPUs ever on overflow nodes or
// waiting to be placed, since Arm.
func (w *Watcher) PeakOverflowGPUs() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

func (w *Watcher) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !w.seen[msg] {
		w.seen[msg] = true
		w.list = append(w.list, msg)
	}
}

// event checks everything after one change (old and cur may be nil).
func (w *Watcher) event(old, cur any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	if p := asPod(cur); p != nil && disruptionTarget(p) && (asPod(old) == nil || !disruptionTarget(asPod(old))) {
		w.evictedPod(p)
		w.checkBudgets(p)
	}
	w.checkRoom()
}

func asPod(obj any) *v1.Pod {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, _ := obj.(*v1.Pod)
	return p
}

func disruptionTarget(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

func (w *Watcher) evictedPod(p *v1.Pod) {
	switch {
	case p.Spec.PriorityClassName == w.opts.Research:
		w.evicted["research"]++
		w.violate("research pod %s/%s was evicted", p.Namespace, p.Name)
	case metav1.GetControllerOf(p) == nil:
		w.evicted["bare"]++
		w.violate("pod %s/%s, which has no controller, was evicted: nothing recreates it", p.Namespace, p.Name)
	case p.Spec.PriorityClassName == w.opts.Production:
		w.evicted["production"]++
	default:
		w.evicted["other"]++
	}
}

// checkBudgets, at the eviction of victim: every PodDisruptionBudget that
// selects it keeps at least the healthy pods its spec requires; when none
// does, its controller keeps what the default budget requires.
func (w *Watcher) checkBudgets(victim *v1.Pod) {
	selected := false
	for _, obj := range w.pdbs.List() {
		pdb := obj.(*policyv1.PodDisruptionBudget)
		if pdb.Namespace != victim.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(victim.Labels)) {
			continue
		}
		selected = true
		var healthy int
		expected := map[string]int32{} // controller -> replicas
		for _, o := range w.pods.List() {
			p := o.(*v1.Pod)
			if p.Namespace != pdb.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil {
				if n, ok := w.replicas(p.Namespace, ref); ok {
					expected[string(ref.UID)] = n
				}
			}
			if healthyPod(p) {
				healthy++
			}
		}
		var total int32
		for _, n := range expected {
			total += n
		}
		need, ok := desiredHealthy(pdb, int(total))
		if ok && healthy < need {
			w.overdrafts++
			w.violate("evicting %s left PodDisruptionBudget %s/%s with %d healthy pods; it requires %d of %d", victim.Name, pdb.Namespace, pdb.Name, healthy, need, total)
		}
	}
	ref := metav1.GetControllerOf(victim)
	if selected || ref == nil {
		return
	}
	replicas, ok := w.replicas(victim.Namespace, ref)
	if !ok {
		return
	}
	down, err := intstr.GetScaledValueFromIntOrPercent(w.opts.DefaultMaxUnavailable, int(replicas), false)
	if err != nil {
		return
	}
	need := int(replicas) - max(down, 1)
	healthy := 0
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if c := metav1.GetControllerOf(p); c != nil && c.UID == ref.UID && healthyPod(p) {
			healthy++
		}
	}
	if healthy < need {
		w.overdrafts++
		w.violate("evicting %s left %s %s/%s, which has no PodDisruptionBudget, with %d healthy pods; its default budget requires %d of %d",
			victim.Name, ref.Kind, victim.Namespace, ref.Name, healthy, need, replicas)
	}
}

// healthyPod: Ready, not being deleted, not being evicted.
func healthyPod(p *v1.Pod) bool {
	return disruption.Healthy(p) && !disruptionTarget(p)
}

// replicas is a controller's desired replicas (ReplicaSets and
// StatefulSets; the controllers sluice moves pods of).
func (w *Watcher) replicas(ns string, ref *metav1.OwnerReference) (int32, bool) {
	var idx cache.Indexer
	switch ref.Kind {
	case "ReplicaSet":
		idx = w.rss
	case "StatefulSet":
		idx = w.sts
	default:
		return 0, false
	}
	obj, ok, _ := idx.GetByKey(ns + "/" + ref.Name)
	if !ok {
		return 0, false
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		if o.Spec.Replicas != nil {
			return *o.Spec.Replicas, true
		}
	case *appsv1.StatefulSet:
		if o.Spec.Replicas != nil {
			return *o.Spec.Replicas, true
		}
	}
	return 1, true
}

func desiredHealthy(pdb *policyv1.PodDisruptionBudget, expected int) (int, bool) {
	switch {
	case pdb.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, expected, true)
		return v, err == nil
	case pdb.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, expected, true)
		return expected - v, err == nil
	}
	return 0, false
}

// checkRoom: production on overflow nodes plus production waiting to be
// placed fits the overflow room.
func (w *Watcher) checkRoom() {
	if w.opts.OverflowGPUs <= 0 || w.opts.IsOverflowNode == nil {
		return
	}
	var gpus int64
	var waiting []string
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		if p.Spec.PriorityClassName != w.opts.Production || p.DeletionTimestamp != nil ||
			p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		switch {
		case p.Spec.NodeName == "":
			gpus += gpusOf(p, w.opts.GPUResource)
			waiting = append(waiting, p.Name)
		case w.opts.IsOverflowNode(p.Spec.NodeName):
			gpus += gpusOf(p, w.opts.GPUResource)
		}
	}
	w.peak = max(w.peak, gpus)
	if gpus > w.opts.OverflowGPUs {
		sort.Strings(waiting)
		w.violate("production evicted beyond the overflow room: %d GPUs of production on overflow nodes or waiting (%d waiting), room is %d",
			gpus, len(waiting), w.opts.OverflowGPUs)
	}
}

func gpusOf(p *v1.Pod, gpu v1.ResourceName) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[gpu]; ok {
			n += q.Value()
		}
	}
	return n
}

// Gangs checks, at rest, that no gang is partly bound: of the pods
// grouped by groupOf (the gang's name, "" for a pod of no gang), either
// all are bound or none. It returns the partly bound gangs.
func (w *Watcher) Gangs(groupOf func(*v1.Pod) string) []string {
	bound, total := map[string]int{}, map[string]int{}
	for _, o := range w.pods.List() {
		p := o.(*v1.Pod)
		g := groupOf(p)
		if g == "" || p.DeletionTimestamp != nil {
			continue
		}
		total[g]++
		if p.Spec.NodeName != "" {
			bound[g]++
		}
	}
	var out []string
	for g, n := range total {
		if bound[g] > 0 && bound[g] < n {
			out = append(out, fmt.Sprintf("gang %s: %d of %d pods bound", g, bound[g], n))
		}
	}
	sort.Strings(out)
	return out
}

// GangOf is the gang of a pod by either API: a native pod's scheduling
// group, or a scheduler-plugins pod-group label.
func GangOf(p *v1.Pod) string {
	if p.Spec.SchedulingGroup != nil && p.Spec.SchedulingGroup.PodGroupName != nil {
		return p.Namespace + "/" + *p.Spec.SchedulingGroup.PodGroupName
	}
	if g := p.Labels["scheduling.x-k8s.io/pod-group"]; g != "" {
		return p.Namespace + "/" + g
	}
	return ""
}
