// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	schedulingv1beta1ac "k8s.io/client-go/applyconfigurations/scheduling/v1beta1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// FieldManager is sluice's server-side-apply field manager.
const FieldManager = "sluice-scheduler"

// Reporter tells users about gangs: Events on PodGroups and their pods, and
// PodGroup status conditions. Conditions are written by a background
// worker with server-side apply (so they merge with the conditions
// kube-scheduler writes), only when they change, and never from inside a
// scheduling cycle.
type Reporter struct {
	client   kubernetes.Interface
	dyn      dynamic.Interface
	recorder events.EventRecorderLogger
	queue    workqueue.TypedInterface[Key]

	// Conditions by gang and type: an apply carries every condition
	// sluice owns on the PodGroup (one it left out would be removed).
	mu      sync.Mutex
	desired map[Key]map[string]metav1.Condition
	written map[Key]map[string]metav1.Condition
}

// NewReporter starts a reporter that stops with ctx.
func NewReporter(ctx context.Context, client kubernetes.Interface, cfg *rest.Config, recorder events.EventRecorderLogger) (*Reporter, error) {
	r := &Reporter{
		client:   client,
		recorder: recorder,
		queue:    workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[Key]{Name: "sluice-gang-status"}),
		desired:  map[Key]map[string]metav1.Condition{},
		written:  map[Key]map[string]metav1.Condition{},
	}
	if cfg != nil {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		r.dyn = dyn
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	go func() {
		for r.writeNext(ctx) {
		}
	}()
	return r, nil
}

// Event records an event about a PodGroup (obj is a *schedulingv1beta1.PodGroup
// or a *v1alpha1.PodGroup) and the same event on each member pod.
func (r *Reporter) Event(obj runtime.Object, pods []*v1.Pod, eventType, reason, action, message string) {
	if r.recorder == nil {
		return
	}
	if ref := objectRef(obj); ref != nil {
		r.recorder.Eventf(ref, nil, eventType, reason, action, "%s", message)
	}
	for _, p := range pods {
		r.recorder.Eventf(p, nil, eventType, reason, action, "%s", message)
	}
}

func objectRef(obj runtime.Object) *v1.ObjectReference {
	switch pg := obj.(type) {
	case *v1alpha1.PodGroup:
		return &v1.ObjectReference{
			APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup",
			Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
		}
	case interface {
		GetNamespace() string
		GetName() string
		GetUID() types.UID
		GetResourceVersion() string
	}:
		return &v1.ObjectReference{
			APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup",
			Namespace: pg.GetNamespace(), Name: pg.GetName(), UID: pg.GetUID(), ResourceVersion: pg.GetResourceVersion(),
		}
	}
	return nil
}

// SetCondition asks for cond on the gang's PodGroup status. Repeating the
// condition last written (same status, reason and message) does nothing.
func (r *Reporter) SetCondition(key Key, cond metav1.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.written[key][cond.Type]
	if ok && w.Status == cond.Status && w.Reason == cond.Reason && w.Message == cond.Message {
		delete(r.desired[key], cond.Type)
		return
	}
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
		if ok && w.Status == cond.Status {
			cond.LastTransitionTime = w.LastTransitionTime
		}
	}
	if r.desired[key] == nil {
		r.desired[key] = map[string]metav1.Condition{}
	}
	r.desired[key][cond.Type] = cond
	r.queue.Add(key)
}

// Forget drops what the reporter remembers of a gang.
func (r *Reporter) Forget(key Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.desired, key)
	delete(r.written, key)
}

func (r *Reporter) writeNext(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	r.mu.Lock()
	desired := r.desired[key]
	delete(r.desired, key)
	if len(desired) == 0 {
		r.mu.Unlock()
		return true
	}
	all, known := r.written[key]
	all = maps.Clone(all)
	r.mu.Unlock()
	if !known {
		// First write since this process started (a restart, a new
		// leader): sluice's conditions already on the PodGroup go into
		// the apply, or applying without them would remove them.
		all = r.current(ctx, key)
	}
	maps.Copy(all, desired)
	conds := slices.SortedFunc(maps.Values(all), func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	if err := r.apply(ctx, key, conds); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not write PodGroup conditions", "podGroup", key, "err", err)
		return true
	}
	r.mu.Lock()
	r.written[key] = all
	r.mu.Unlock()
	return true
}

// current are sluice's conditions (types under sluice.dev/) on a
// PodGroup now; none when it cannot be read.
func (r *Reporter) current(ctx context.Context, key Key) map[string]metav1.Condition {
	var conds []metav1.Condition
	switch key.API {
	case Native:
		if pg, err := r.client.SchedulingV1beta1().PodGroups(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err == nil {
			conds = pg.Status.Conditions
		}
	case Label:
		if r.dyn != nil {
			if u, err := r.dyn.Resource(v1alpha1.Resource).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err == nil {
				pg := &v1alpha1.PodGroup{}
				if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg) == nil {
					conds = pg.Status.Conditions
				}
			}
		}
	}
	out := map[string]metav1.Condition{}
	for _, c := range conds {
		if strings.HasPrefix(c.Type, "sluice.dev/") {
			out[c.Type] = c
		}
	}
	return out
}

func (r *Reporter) apply(ctx context.Context, key Key, conds []metav1.Condition) error {
	condACs := make([]*metav1ac.ConditionApplyConfiguration, len(conds))
	for i, cond := range conds {
		condACs[i] = metav1ac.Condition().
			WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).
			WithMessage(cond.Message).WithLastTransitionTime(cond.LastTransitionTime)
	}
	switch key.API {
	case Native:
		ac := schedulingv1beta1ac.PodGroup(key.Name, key.Namespace).
			WithStatus(schedulingv1beta1ac.PodGroupStatus().WithConditions(condACs...))
		_, err := r.client.SchedulingV1beta1().PodGroups(key.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		return err
	case Label:
		if r.dyn == nil {
			return fmt.Errorf("no dynamic client")
		}
		body, err := json.Marshal(map[string]any{
			"apiVersion": v1alpha1.SchemeGroupVersion.String(),
			"kind":       "PodGroup",
			"metadata":   map[string]any{"name": key.Name, "namespace": key.Namespace},
			"status":     map[string]any{"conditions": condACs},
		})
		if err != nil {
			return err
		}
		_, err = r.dyn.Resource(v1alpha1.Resource).Namespace(key.Namespace).Patch(ctx, key.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}, "status")
		return err
	}
	return fmt.Errorf("unknown gang API %q", key.API)
}
