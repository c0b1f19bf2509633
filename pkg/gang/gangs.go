// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
)

// Gang is a gang as every plugin sees it, whichever API declares it.
type Gang struct {
	Key Key
	// PodGroup is the *schedulingv1beta1.PodGroup or *v1alpha1.PodGroup,
	// for Events and conditions.
	PodGroup runtime.Object
	// MinMember is the quorum: the fewest members that may run (at least
	// 1).
	MinMember int
	// ScheduleTimeout is how long placed members wait at Permit for the
	// rest (label gangs: the PodGroup's scheduleTimeoutSeconds), 0 when
	// the PodGroup sets none.
	ScheduleTimeout time.Duration
	// Request is where the gang asks to be placed.
	Request FabricRequest
}

// Timeout is the gang's ScheduleTimeout, or def when it sets none.
func (g *Gang) Timeout(def time.Duration) time.Duration {
	if g.ScheduleTimeout > 0 {
		return g.ScheduleTimeout
	}
	return def
}

// Gangs reads gangs of both APIs: scheduler-plugins PodGroups through
// PodGroups, native ones through the scheduler's lister, members through
// the scheduler's pod informer.
type Gangs struct {
	labels  *PodGroups
	native  schedulinglisters.PodGroupLister
	members *MemberIndex
	fabric  *config.FabricConfig
}

// NewGangs reads gangs; native is nil where the native API is not watched
// (its gangs are then not found).
func NewGangs(labels *PodGroups, native schedulinglisters.PodGroupLister, members *MemberIndex, fabric *config.FabricConfig) *Gangs {
	return &Gangs{labels: labels, native: native, members: members, fabric: fabric}
}

// LabelPodGroups is the scheduler-plugins PodGroup source.
func (g *Gangs) LabelPodGroups() *PodGroups { return g.labels }

// ErrNotFound is returned (wrapped) for a gang whose PodGroup does not
// exist (yet).
var ErrNotFound = errors.New("PodGroup not found")

// Get returns a gang. The error wraps ErrNotFound when its PodGroup does
// not exist, and is an *InvalidError when the PodGroup cannot be read or
// asks for a placement the fabric does not have.
func (g *Gangs) Get(key Key) (*Gang, error) {
	switch key.API {
	case Native:
		if g.native == nil {
			return nil, fmt.Errorf("gang %s: %w (native PodGroups are not watched: enable the GenericWorkload feature gate)", key, ErrNotFound)
		}
		pg, err := g.native.PodGroups(key.Namespace).Get(key.Name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("gang %s: %w", key, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		return g.nativeGang(key, pg)
	case Label:
		pg, err := g.labels.Get(key.Namespace, key.Name)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("gang %s: %w", key, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		return g.labelGang(key, pg)
	}
	return nil, fmt.Errorf("gang %s: unknown API", key)
}

// NativeGang is Get for a native PodGroup the caller already has (the
// framework hands one to PodGroup cycle plugins).
func (g *Gangs) NativeGang(pg *schedulingv1beta1.PodGroup) (*Gang, error) {
	return g.nativeGang(Key{API: Native, Namespace: pg.Namespace, Name: pg.Name}, pg)
}

func (g *Gangs) nativeGang(key Key, pg *schedulingv1beta1.PodGroup) (*Gang, error) {
	out := &Gang{Key: key, PodGroup: pg, MinMember: 1}
	if gp := pg.Spec.SchedulingPolicy.Gang; gp != nil {
		out.MinMember = max(int(gp.MinCount), 1)
	}
	annotations, err := g.requestAnnotations(key, pg.Annotations)
	if err != nil {
		return out, &InvalidError{Reason: ReasonInvalidRequest, Key: key, Err: err}
	}
	req, err := NativeFabricRequest(pg, annotations, g.fabric)
	if err != nil {
		return out, &InvalidError{Reason: ReasonInvalidRequest, Key: key, Err: err}
	}
	out.Request = req
	return out, nil
}

func (g *Gangs) labelGang(key Key, pg *v1alpha1.PodGroup) (*Gang, error) {
	out := &Gang{Key: key, PodGroup: pg, MinMember: max(int(pg.Spec.MinMember), 1)}
	if msg, bad := pg.Annotations[MalformedAnnotation]; bad {
		return out, &InvalidError{Reason: ReasonMalformedPodGroup, Key: key, Err: errors.New(msg)}
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		out.ScheduleTimeout = time.Duration(*t) * time.Second
	}
	annotations, err := g.requestAnnotations(key, pg.Annotations)
	if err != nil {
		return out, &InvalidError{Reason: ReasonInvalidRequest, Key: key, Err: err}
	}
	req, err := ParseFabricRequest(annotations, g.fabric)
	if err != nil {
		return out, &InvalidError{Reason: ReasonInvalidRequest, Key: key, Err: err}
	}
	out.Request = req
	return out, nil
}

// requestAnnotations are the annotations a gang's fabric request is read
// from: its PodGroup's when they hold any fabric annotation, else its
// members' (JobSet, Kubeflow Trainer, LeaderWorkerSet and Kueue write them
// on the pod template): the members that carry any must agree.
func (g *Gangs) requestAnnotations(key Key, podGroup map[string]string) (map[string]string, error) {
	for _, k := range fabricAnnotations() {
		if _, ok := podGroup[k]; ok {
			return podGroup, nil
		}
	}
	if g.members == nil {
		return podGroup, nil
	}
	pods, err := g.members.List(key)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	from := ""
	for _, p := range pods {
		got := fabricOf(p.Annotations)
		if got == nil {
			continue // a template left bare (an LWS leader's, say)
		}
		if from == "" {
			out, from = got, p.Name
			continue
		}
		if !maps.Equal(out, got) {
			a, b := from, p.Name
			if b < a {
				a, b, out, got = b, a, got, out
			}
			return nil, fmt.Errorf("pods %s and %s ask for different fabric placements (%v and %v): annotate the PodGroup, or every pod alike", a, b, out, got)
		}
	}
	return out, nil
}

// fabricOf picks the fabric annotations (nil when there are none: most
// gangs' pods, read without allocating).
func fabricOf(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range fabricAnnotations() {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// Scheduler is what the scheduler knows of gang members beyond the pod
// informer: the pods it holds at Permit (placed on a node, not yet bound)
// and, for native gangs, the pods its PodGroup state counts as scheduled.
type Scheduler interface {
	// WaitingPods visits every pod waiting at Permit (its spec.nodeName is
	// the node it is assumed on).
	WaitingPods(visit func(*v1.Pod))
	// NativeScheduled returns the pods of a native PodGroup the scheduler
	// has assumed or bound, and whether it knows the PodGroup.
	NativeScheduled(namespace, name string) ([]*v1.Pod, bool)
}

// Members are a gang's live pods, placed and not.
type Members struct {
	// Placed are bound or assumed on a node (waiting at Permit, or, for
	// native gangs, counted scheduled by the scheduler's PodGroup state).
	Placed []*v1.Pod
	// Pending are the others.
	Pending []*v1.Pod
}

// PlacedNodes are the nodes of the placed members.
func (m Members) PlacedNodes() []string {
	out := make([]string, 0, len(m.Placed))
	for _, p := range m.Placed {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

// All is every live member.
func (m Members) All() []*v1.Pod { return append(append([]*v1.Pod(nil), m.Placed...), m.Pending...) }

// MembersOf returns a gang's live members as placed and pending: one
// answer for every plugin (Permit's quorum, the fabric plan's pinned
// nodes, a claim's claimants).
func (g *Gangs) MembersOf(key Key, s Scheduler) (Members, error) {
	live, err := g.members.List(key)
	if err != nil {
		return Members{}, err
	}
	placed := map[types.UID]*v1.Pod{}
	if key.API == Native {
		if scheduled, ok := s.NativeScheduled(key.Namespace, key.Name); ok {
			for _, p := range scheduled {
				placed[p.UID] = p
			}
		}
	}
	s.WaitingPods(func(p *v1.Pod) {
		if k, ok := KeyOf(p); ok && k == key && p.Spec.NodeName != "" {
			placed[p.UID] = p
		}
	})
	var out Members
	for _, p := range live {
		if w, ok := placed[p.UID]; ok {
			out.Placed = append(out.Placed, w)
			delete(placed, p.UID)
			continue
		}
		if p.Spec.NodeName != "" {
			out.Placed = append(out.Placed, p)
		} else {
			out.Pending = append(out.Pending, p)
		}
	}
	// Placed pods the informer does not have yet (just created) count too.
	for _, p := range placed {
		out.Placed = append(out.Placed, p)
	}
	return out, nil
}

// HandleScheduler is the Scheduler a plugin's framework handle knows.
func HandleScheduler(h fwk.Handle) Scheduler { return handleScheduler{h} }

type handleScheduler struct{ h fwk.Handle }

func (s handleScheduler) WaitingPods(visit func(*v1.Pod)) {
	s.h.IterateOverWaitingPods(func(wp fwk.WaitingPod) { visit(wp.GetPod()) })
}

func (s handleScheduler) NativeScheduled(namespace, name string) ([]*v1.Pod, bool) {
	lister := s.h.SnapshotSharedLister()
	if lister == nil {
		return nil, false
	}
	st, err := lister.PodGroupStates().Get(namespace, name)
	if err != nil {
		return nil, false
	}
	return st.ScheduledPods(), true
}
