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
	// Ready at once (at any pod event since track), and budget its PDB's
	// allowance.
	worstUnavailable map[string]int
	desired          map[string]int

	// Availability, followed at every pod event: each tracked
	// Deployment's Ready replicas now (ready, since lastAt), and per
	// phase ("claim", "return") its minimum and the replica-seconds below
	// spec.replicas.
	ready  map[string]int
	lastAt time.Time
	phase  string
	avail  map[string]map[string]*availability
}

// availability is one Deployment's during one phase.
type availability struct {
	minReady     int
	belowSeconds float64
	seconds      float64
}

func newObserver(ctx context.Context, c *cluster, o *Options, start time.Time) (*observer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods()
	inf := pods.Informer()
	ob := &observer{start: start, pods: pods.Lister(), nodes: c.nodes, gpus: o.GPUsPerNode,
		worstUnavailable: map[string]int{}, desired: map[string]int{}, ready: map[string]int{},
		avail: map[string]map[string]*availability{}}
	recount := func(any) { ob.recount() }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: recount, UpdateFunc: func(_, obj any) { recount(obj) }, DeleteFunc: recount,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return ob, nil
}

// recount integrates each tracked Deployment's shortfall up to now and
// counts its Ready replicas afresh (a pod being deleted is not serving).
// Serialised: the informer's handler and the story both call it.
func (ob *observer) recount() {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.recountLocked()
}

// recountLocked is recount; called with ob.mu.
func (ob *observer) recountLocked() {
	now := time.Now()
	pods, _ := ob.pods.List(labels.Everything())
	ready := map[string]int{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(p) && p.Spec.PriorityClassName != "research" {
			ready[p.Labels["app"]]++
		}
	}
	ob.integrateLocked(now)
	for app, want := range ob.desired {
		ob.ready[app] = ready[app]
		if un := want - ready[app]; un > ob.worstUnavailable[app] {
			ob.worstUnavailable[app] = un
		}
		if a := ob.avail[ob.phase][app]; a != nil && ready[app] < a.minReady {
			a.minReady = ready[app]
		}
	}
}

// integrateLocked adds the time since lastAt to the phase's figures.
// Called with ob.mu.
func (ob *observer) integrateLocked(now time.Time) {
	dt := now.Sub(ob.lastAt).Seconds()
	if dt < 0 {
		return
	}
	ob.lastAt = now
	if ob.phase == "" {
		return
	}
	for app, want := range ob.desired {
		if a := ob.avail[ob.phase][app]; a != nil {
			a.seconds += dt
			if short := want - ob.ready[app]; short > 0 {
				a.belowSeconds += float64(short) * dt
			}
		}
	}
}

// setPhase ends the current phase now and starts phase ("" for none).
func (ob *observer) setPhase(phase string) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.recountLocked()
	ob.phase = phase
	if phase == "" {
		return
	}
	ob.avail[phase] = map[string]*availability{}
	for app := range ob.desired {
		ob.avail[phase][app] = &availability{minReady: ob.ready[app]}
	}
}

// availabilityOf is a Deployment's figures for a phase.
func (ob *observer) availabilityOf(phase, app string) (availability, bool) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	a, ok := ob.avail[phase][app]
	if !ok {
		return availability{}, false
	}
	return *a, true
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
