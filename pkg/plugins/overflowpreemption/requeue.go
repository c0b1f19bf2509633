// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// watchOverflowRoom retries the research pods that could not claim room
// because the overflow nodes had none when an overflow node gains room:
// it turns Ready, its allocatable or its providers' offer changes (a
// provider came back), a pod leaves it, or a claim holding room ends. Without this such pods would wait for the periodic flush
// of unschedulable pods, five minutes by default.
func (pl *OverflowPreemption) watchOverflowRoom(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	// Claims can be recorded once the cluster serves them, and room comes
	// back when a claim ends or is given up.
	pl.store.OnServed(func() { pl.waiting.ActivateAll(logger, "ResearchClaims served") })
	retry := func(any) { pl.waiting.ActivateAll(logger, "a research claim ended or changed") }
	pl.store.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, o any) { retry(o) }, DeleteFunc: retry})
	informers := pl.handle.SharedInformerFactory()
	classes := pl.classes
	if classes.Namespace != nil {
		if err := requeue.OnNamespaceLabels(informers.Core().V1().Namespaces().Informer(), func() {
			pl.waiting.ActivateAll(logger, "a namespace's labels changed (the tenancy policy)")
		}); err != nil {
			return err
		}
	}
	if _, err := informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok && classes.IsOverflowNode(n) && overflow.NodeReady(n) {
				pl.waiting.ActivateAll(logger, "overflow node added")
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !classes.IsOverflowNode(cur) || !overflow.NodeReady(cur) {
				return
			}
			if !overflow.NodeReady(old) || !equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) ||
				old.Annotations[offer.Annotation] != cur.Annotations[offer.Annotation] {
				pl.waiting.ActivateAll(logger, "overflow node Ready or resized")
			}
		},
	}); err != nil {
		return err
	}
	nodes := informers.Core().V1().Nodes().Lister()
	_, err := informers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			p, ok := obj.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" || pl.waiting.Len() == 0 {
				return
			}
			if node, err := nodes.Get(p.Spec.NodeName); err == nil && classes.IsOverflowNode(node) {
				pl.waiting.ActivateAll(logger, "a pod left an overflow node")
			}
		},
	})
	return err
}
