// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/overflow"
)

// waiting remembers research pods that could not claim room because the
// overflow nodes had none, and puts them back in the active queue when an
// overflow node gains room: it turns Ready, its allocatable changes (a
// provider came back), or a pod leaves it. PostFilter plugins take no part
// in the queue's requeueing hints (only the Filter plugins that rejected a
// pod do, and none of them looks at overflow nodes for a research pod), so
// without this such pods would wait for the periodic flush of
// unschedulable pods, five minutes by default.
type waiting struct {
	handle  fwk.Handle
	classes *overflow.Classes
	mu      sync.Mutex
	pods    map[string]*v1.Pod
}

func newWaiting(ctx context.Context, h fwk.Handle, classes *overflow.Classes) (*waiting, error) {
	w := &waiting{handle: h, classes: classes, pods: map[string]*v1.Pod{}}
	informers := h.SharedInformerFactory()
	if _, err := informers.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok && classes.IsOverflowNode(n) && overflow.NodeReady(n) {
				w.activate(ctx, "overflow node added")
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !classes.IsOverflowNode(cur) || !overflow.NodeReady(cur) {
				return
			}
			if !overflow.NodeReady(old) || !equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) {
				w.activate(ctx, "overflow node Ready or resized")
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := informers.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			p, ok := obj.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" {
				return
			}
			node, err := informers.Core().V1().Nodes().Lister().Get(p.Spec.NodeName)
			if err == nil && classes.IsOverflowNode(node) {
				w.activate(ctx, "a pod left an overflow node")
			}
		},
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// add remembers pods that wait for overflow room.
func (w *waiting) add(pods []*v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range pods {
		w.pods[p.Namespace+"/"+p.Name] = p
	}
}

// activate moves the remembered pods to the active queue.
func (w *waiting) activate(ctx context.Context, why string) {
	w.mu.Lock()
	pods := w.pods
	if len(pods) == 0 {
		w.mu.Unlock()
		return
	}
	w.pods = map[string]*v1.Pod{}
	w.mu.Unlock()
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Requeueing research pods waiting for overflow room", "pods", len(pods), "why", why)
	w.handle.Activate(logger, pods)
}
