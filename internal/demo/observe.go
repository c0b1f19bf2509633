// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
)

// class of a GPU in the view.
type class byte

const (
	free       class = '.'
	production class = 'P'
	research   class = 'R'
)

// sample is the cluster at one moment.
type sample struct {
	at time.Duration
	// gpus[node][i] is the class of GPU i of a physical node.
	gpus map[string][]class
	// Counts in GPUs.
	research, production, overflow int
	// Pods.
	overflowPods, overflowReady, productionReady, productionPods int
	researchRunning, researchPods                                int
	step                                                         string
}

// observer keeps the latest sample and the history.
type observer struct {
	start   time.Time
	pods    corelisters.PodLister
	nodes   []nodeInfo
	gpus    int
	mu      sync.Mutex
	step    string
	history []sample
	// worstUnavailable[app] is the most replicas of a Deployment ever not
	// Ready at once, and budget its PDB's allowance.
	worstUnavailable map[string]int
	desired          map[string]int
}

func newObserver(ctx context.Context, c *cluster, o *Options, start time.Time) (*observer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods()
	inf := pods.Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return &observer{start: start, pods: pods.Lister(), nodes: c.nodes, gpus: o.GPUsPerNode,
		worstUnavailable: map[string]int{}, desired: map[string]int{}}, nil
}

func (ob *observer) setStep(s string) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.step = s
}

// take samples the cluster now and keeps the sample.
func (ob *observer) take() sample {
	pods, _ := ob.pods.List(labels.Everything())
	s := sample{at: time.Since(ob.start), gpus: map[string][]class{}}
	for _, n := range ob.nodes {
		row := make([]class, ob.gpus)
		for i := range row {
			row[i] = free
		}
		s.gpus[n.name] = row
	}
	readyByApp := map[string]int{}
	for _, p := range pods {
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		cl := production
		if p.Spec.PriorityClassName == "research" {
			cl = research
			s.researchPods++
		} else {
			s.productionPods++
		}
		ready := podReady(p)
		if ready && p.DeletionTimestamp == nil {
			if cl == research {
				s.researchRunning++
			} else {
				s.productionReady++
				readyByApp[p.Labels["app"]]++
			}
		}
		if p.Spec.NodeName == "" {
			continue
		}
		g := gpusOf(p)
		if p.Spec.NodeName == overflowNode {
			s.overflowPods++
			s.overflow += g
			if ready {
				s.overflowReady++
			}
			continue
		}
		if cl == research {
			s.research += g
		} else {
			s.production += g
		}
		row := s.gpus[p.Spec.NodeName]
		for i := 0; i < len(row) && g > 0; i++ {
			if row[i] == free {
				row[i] = cl
				g--
			}
		}
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for app, want := range ob.desired {
		if un := want - readyByApp[app]; un > ob.worstUnavailable[app] {
			ob.worstUnavailable[app] = un
		}
	}
	s.step = ob.step
	ob.history = append(ob.history, s)
	return s
}

// track starts recording a Deployment's worst unavailability from now.
func (ob *observer) track(app string, replicas int) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.desired[app] = replicas
	ob.worstUnavailable[app] = 0
}

func (ob *observer) samples() []sample {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return append([]sample(nil), ob.history...)
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func gpusOf(p *v1.Pod) int {
	q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})["nvidia.com/gpu"]
	return int(q.Value())
}
