// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package inferencepacking is the InferencePacking plugin (production
// profile): it packs inference onto nodes, then leaf switches, that already
// run production, so whole nodes and whole leaves stay free for training
// gangs, and it puts overflow nodes last, so production overflows only when
// no physical node fits. It also keeps production off the nodes a live
// research claim holds, so a replacement never lands back on the node its
// pod was just moved from. When few nodes have room for a pod's GPUs, it
// names those nodes to the scheduler (PreFilter), which then filters and
// scores only them instead of crossing every full node on the way.
package inferencepacking

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "InferencePacking"

// Score parts; they add up to fwk.MaxScore for the best physical node.
const (
	// physicalFloor puts every physical node above every overflow node
	// (which scores 0) by a margin that, with the plugin's weight, other
	// scores do not bridge.
	physicalFloor = 40
	nodeTerm      = 30
	leafTerm      = 20
	packTerm      = 10
)

// Runtime is what the plugin needs of the scheduler's sluice runtime.
type Runtime interface {
	Declare(ctx context.Context, h fwk.Handle, path *field.Path, f config.Facts) error
	Seal() error
	Fabric() (*fabric.Tracker, *config.FabricConfig)
	Classes() *overflow.Classes
	// Claims is the store of research claims, nil when no profile runs
	// claims.
	Claims() *claims.Store
	// Ledger is the disruption ledger, which holds the overflow room
	// live claims reserve (nil with Claims).
	Ledger() *disruption.Ledger
}

// Filter reasons.
const (
	// ReasonClaimed: a research claim holds the node.
	ReasonClaimed = "ClaimedForResearch"
	// ReasonCannotRunThere: no provider behind the overflow node can run
	// the pod as written (offer.Portable), so binding it there would
	// leave it pending for good.
	ReasonCannotRunThere = "OverflowCannotRunPod"
	// ReasonNoRoom: no provider behind the overflow node has room for the
	// whole pod, less what live claims hold there for their victims, so
	// dispatch would fail (the node sums its providers' room).
	ReasonNoRoom = "OverflowNoRoom"
)

// InferencePacking is the plugin.
type InferencePacking struct {
	rt      Runtime
	once    sync.Once
	initErr error
	handle  fwk.Handle
	classes *overflow.Classes
	tracker *fabric.Tracker
	gpu     v1.ResourceName
	// insufficient is NodeResourcesFit's reason for a node without room
	// for the GPUs a pod asks for.
	insufficient string
	store        *claims.Store
	// ledger holds the overflow room live claims reserve.
	ledger *disruption.Ledger
	// waiting are production pods a claimed node turned away, retried
	// when a claim ends (the queue does not watch claims), and pods no
	// overflow node could run, retried when an overflow node's offer
	// changes.
	waiting *requeue.Waiting
	// offers are the overflow nodes' offers, by node name, kept by a node
	// informer handler; replaced whole, never changed once stored.
	offers atomic.Pointer[map[string]nodeOffer]
	// counted is each overflow node's room with its pods counted (no
	// claim's reservation held), by node name, kept while its NodeInfo
	// generation and offer stay: Filter asks on every overflow node for
	// every production pod, and an overflow node may run thousands.
	countedMu sync.Mutex
	counted   map[string]countedRoom

	// mu guards the incremental view of where production runs. PreScore
	// looks again only at the nodes this profile reserved production on
	// or forgot it from since the last cycle (hinted), and at every node
	// when the node list changed or fullRescan has passed since it last
	// did: a change the scheduler did not make here (a pod deleted,
	// production placed by another scheduler) is seen within fullRescan.
	mu       sync.Mutex
	clock    clock.PassiveClock
	tree     *fabric.Tree
	entries  []entry // by position in the snapshot's node list
	position map[string]int32
	hinted   sets.Set[string]
	// list is the first element of the node list last seen: the
	// scheduler makes the list anew when nodes come or go.
	list     *fwk.NodeInfo
	lastFull time.Time
	// leafOf is each tree node's leaf (a dense index). The counts are
	// by tree node (overflow nodes, production nodes) and by leaf
	// (production nodes); counts, not flags, so that a node seen at a new
	// position of the list may be added before its old position is
	// removed.
	leafOf        []int32
	overflowCount []int32
	nodeCount     []int32
	leafCount     []int32
	// outside counts the positions of the list whose node the tree does
	// not have.
	outside int32
	// byFree counts the nodes that offer GPUs by how many are free
	// (maxNarrowGPUs and more in the last), for narrow's estimate.
	byFree []int32
	// byInfo is the tree node index of each of the snapshot's NodeInfos,
	// which stay the same objects while their node exists: Score finds a
	// node by the pointer it is given, not by hashing and comparing its
	// name (which reads the Node object as well). Made anew, never
	// changed, when a position of the list holds another NodeInfo.
	byInfo map[fwk.NodeInfo]int32
	view   *packingView // published; never changed once published
}

// fullRescan is how often PreScore looks at every node for changes no
// Reserve or Unreserve hinted.
const fullRescan = time.Second

// nodeOffer is an overflow node's offer, or why it could not be read.
type nodeOffer struct {
	offer offer.Offer
	err   error
	raw   string // the annotation
}

// countedRoom is an overflow node's room, counted at a NodeInfo
// generation under an offer (its annotation).
type countedRoom struct {
	generation int64
	raw        string
	room       *overflow.Ledger
}

// entry is what PreFilter or PreScore last saw at one position of the node
// list.
type entry struct {
	info       fwk.NodeInfo
	generation int64
	index      int32 // tree node index, -1 when the tree does not have it
	overflow   bool
	production bool
	name       string
	// offersGPUs: the node's allocatable GPUs are more than 0; free is
	// allocatable less requested, at least 0.
	offersGPUs bool
	free       int64
	// lowest is the lowest priority of the pods on the node that ask for
	// GPUs (math.MaxInt32 when none do): a pod of higher priority may
	// preempt them for their GPUs.
	lowest int32
}

// packingView is every node's score without its GPU term, for the cycles
// that read it.
type packingView struct {
	tree   *fabric.Tree
	byInfo map[fwk.NodeInfo]int32
	base   []int8 // by tree node index
	// uniform: every node of the list is in the tree and has the same
	// base (no production and no overflow node, or production
	// everywhere).
	uniform bool
}

var (
	_ fwk.PreFilterPlugin   = &InferencePacking{}
	_ fwk.FilterPlugin      = &InferencePacking{}
	_ fwk.EnqueueExtensions = &InferencePacking{}
	_ fwk.PreScorePlugin    = &InferencePacking{}
	_ fwk.ScorePlugin       = &InferencePacking{}
	_ fwk.ReservePlugin     = &InferencePacking{}
	_ fwk.SignPlugin        = &InferencePacking{}
)

// New returns the plugin's factory over rt. Its args may state the fabric
// and the classes (once in the whole configuration).
func New(rt Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.InferencePackingArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type InferencePackingArgs, got %T", obj)
		}
		path := validation.ArgsPath(h.ProfileName(), Name)
		if err := validation.ValidateInferencePackingArgs(path, args); err != nil {
			return nil, err
		}
		if err := rt.Declare(ctx, h, path, config.Facts{Fabric: args.Fabric, Overflow: args.Overflow}); err != nil {
			return nil, err
		}
		return &InferencePacking{rt: rt, handle: h, waiting: requeue.NewWaiting(h), clock: clock.RealClock{}}, nil
	}
}

// ready takes the fabric, the classes and the claims from the sealed
// runtime, once (EventsToRegister, at start-up).
func (pl *InferencePacking) ready() error {
	pl.once.Do(func() {
		if pl.initErr = pl.rt.Seal(); pl.initErr != nil {
			return
		}
		tracker, fabricCfg := pl.rt.Fabric()
		pl.tracker, pl.classes, pl.gpu = tracker, pl.rt.Classes(), v1.ResourceName(fabricCfg.GPUResourceName)
		pl.insufficient = "Insufficient " + fabricCfg.GPUResourceName
		pl.store, pl.ledger = pl.rt.Claims(), pl.rt.Ledger()
		pl.offers.Store(&map[string]nodeOffer{})
		if pl.initErr = pl.watchOffers(); pl.initErr != nil {
			return
		}
		if pl.classes.Namespace != nil {
			// Production turned away from the overflow nodes by the
			// tenancy policy may run there once its namespace is labelled.
			if pl.initErr = requeue.OnNamespaceLabels(pl.handle.SharedInformerFactory().Core().V1().Namespaces().Informer(), func() {
				pl.waiting.ActivateAll(klog.Background(), "a namespace's labels changed (the tenancy policy)")
			}); pl.initErr != nil {
				return
			}
		}
		if pl.store != nil {
			// A claim that ends, or is given up, frees its nodes.
			retry := func(any) { pl.waiting.ActivateAll(klog.Background(), "a research claim ended or changed") }
			pl.store.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, o any) { retry(o) }, DeleteFunc: retry})
		}
	})
	return pl.initErr
}

// EventsToRegister seals the runtime. The nodes a claim holds change with
// claims, which the queue does not watch: pods turned away are retried by
// the plugin itself (waiting). A pod PreFilter narrowed to the nodes with
// room for its GPUs, and that fit none of them, has this plugin among
// those that rejected it, for every node left out: it is retried when GPUs
// may have freed (a pod that held some deleted or scaled down) or come (a
// node that offers them added or its allocatable changed), as
// NodeResourcesFit would have retried it.
func (pl *InferencePacking) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	if err := pl.ready(); err != nil {
		return nil, err
	}
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete | fwk.UpdatePodScaleDown}, QueueingHintFn: pl.afterPodFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: pl.afterNodeChange},
	}, nil
}

// afterPodFreed: a pod that asks for GPUs is worth retrying when a pod that
// held GPUs goes or gives some back.
func (pl *InferencePacking) afterPodFreed(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	old, ok := oldObj.(*v1.Pod)
	if !ok || capacity.PodRequest(pod, pl.gpu) == 0 || capacity.PodRequest(old, pl.gpu) == 0 {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// afterNodeChange: a GPU pod is worth retrying when a node that offers GPUs
// comes or its allocatable changes.
func (pl *InferencePacking) afterNodeChange(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*v1.Node)
	if !ok || capacity.PodRequest(pod, pl.gpu) == 0 {
		return fwk.QueueSkip, nil
	}
	if q, ok := node.Status.Allocatable[pl.gpu]; ok && q.Sign() > 0 {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// watchOffers keeps the overflow nodes' offers, and retries the pods no
// overflow node could run when one changes.
func (pl *InferencePacking) watchOffers() error {
	logger := klog.Background()
	update := func(name string, node *v1.Node) {
		old := *pl.offers.Load()
		prev, had := old[name]
		next := make(map[string]nodeOffer, len(old)+1)
		for k, v := range old {
			next[k] = v
		}
		if node == nil || !pl.classes.IsOverflowNode(node) {
			if !had {
				return
			}
			delete(next, name)
		} else {
			o, err := offer.Of(node, true)
			next[name] = nodeOffer{offer: o, err: err, raw: node.Annotations[offer.Annotation]}
		}
		pl.offers.Store(&next)
		if cur, ok := next[name]; (!ok || !had || cur.raw != prev.raw) && pl.waiting.Len() > 0 {
			pl.waiting.ActivateAll(logger, "an overflow node's offer changed")
		}
	}
	_, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n, _ := obj.(*v1.Node); update(nodeName(obj), n) },
		UpdateFunc: func(_, obj any) { n, _ := obj.(*v1.Node); update(nodeName(obj), n) },
		DeleteFunc: func(obj any) { update(nodeName(obj), nil) },
	})
	return err
}

func nodeName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if n, ok := obj.(*v1.Node); ok {
		return n.Name
	}
	return ""
}

const preFilterStateKey fwk.StateKey = "PreFilter" + Name

// preFilterState is the nodes live claims held when the cycle began, the
// overflow nodes that cannot run the pod, with why, and the GPUs Filter
// checks a node has room for (0: none checked).
type preFilterState struct {
	claimed sets.Set[string]
	refuse  map[string]string
	gpus    int64
	// overflowNodes are the overflow nodes whose room Filter checks for a
	// pod that tolerates them (nil: none); held is what live claims hold
	// there, less the room held for the pod if it replaces a victim.
	overflowNodes map[string]nodeOffer
	held          []overflow.Reservation
}

// Clone returns the state: it is not changed after PreFilter.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter takes, once a cycle, the nodes live research claims hold (for
// production) and the overflow nodes that cannot run the pod (for a pod
// that tolerates them). For a pod that asks for GPUs it may name the nodes
// with room for them (narrow), and has Filter turn away a node without
// room before the filters after it run (gpuCheck). It skips Filter when
// there is none of these to do (every cycle of a pod that asks for no GPU,
// nearly): Filter then costs nothing per node.
func (pl *InferencePacking) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, all []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if err := pl.ready(); err != nil {
		return nil, fwk.AsStatus(err)
	}
	s := &preFilterState{}
	if pl.store != nil && pl.classes.IsProduction(pod) {
		s.claimed = pl.store.ClaimedNodes()
	}
	if offers := *pl.offers.Load(); len(offers) > 0 && pl.classes.ToleratesOverflow(pod) {
		s.overflowNodes = offers
		if pl.store != nil && pl.ledger != nil {
			var owner types.UID
			if ref := metav1.GetControllerOf(pod); ref != nil {
				owner = ref.UID
			}
			s.held = pl.ledger.Held(owner)
		}
		notProduction := pl.notProduction(pod)
		for name, o := range offers {
			err := o.err
			if err == nil {
				err = notProduction
			}
			if err == nil {
				err = o.offer.CanRun(pod)
			}
			if err != nil {
				if s.refuse == nil {
					s.refuse = map[string]string{}
				}
				s.refuse[name] = offer.Why(err)
			}
		}
	}
	s.gpus = pl.gpuCheck(pod)
	result := pl.narrow(state, pod, all, s.gpus)
	if s.gpus == 0 && s.claimed.Len() == 0 && len(s.refuse) == 0 && s.overflowNodes == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(preFilterStateKey, s)
	return result, nil
}

// notProduction says why a pod that tolerates the overflow nodes may not
// run there: only production does, and only in its namespaces (the
// tenancy policy), since an overflow node runs its pods, and their
// Secrets, at external providers.
func (pl *InferencePacking) notProduction(pod *v1.Pod) error {
	if pl.classes.IsProduction(pod) {
		return nil
	}
	if setting := pl.classes.Refused(pod); setting != "" {
		return fmt.Errorf("namespace %s is not in %s, so its pods of PriorityClass %s are not production", pod.Namespace, setting, pod.Spec.PriorityClassName)
	}
	return fmt.Errorf("only production runs on overflow nodes, and PriorityClass %q is not production", pod.Spec.PriorityClassName)
}

// Narrowing: the scheduler filters nodes, from where it stopped in the
// last cycle, until it has found its share of feasible ones (at 5,000
// nodes, 500), and fails every full node it crosses on the way in
// NodeResourcesFit, whose GPU check alone (an extended resource name
// validated by regular expression, per node) is most of a cycle's Filter.
// Given a list of nodes instead, it looks only at those, but its share
// then follows the list's size (50% less 1% per 125 nodes, at least 5%):
// given a third of 5,000 nodes it wants 616 feasible ones where it would
// want 500 of the whole list, while sparing the 1,000 full nodes it would
// have crossed. With the costs of a CPU profile of 8-GPU pods at 5,000
// nodes (about 5 us of CPU a node filtered, 3 us a node scored) the two
// break even near 40% of the nodes; narrowing stops at a third. It also
// assumes NodeResourcesFit checks the GPU resource (the shipped profiles
// do; an operator who lists it in NodeResourcesFit's ignoredResources
// should not run this plugin, nor one who lists its group in
// ignoredResourceGroups).
const (
	narrowShare = 3
	// maxNarrowGPUs: pods asking for more GPUs are not narrowed (the
	// estimate's histogram stops there).
	maxNarrowGPUs = 64
)

// narrow returns, for a pod whose gpus gpuCheck gave, the nodes with room
// for them, when those are at most a narrowShare-th of the nodes and not
// none (with none, the scheduler's own reasons say why the pod fits
// nowhere); nil for every node. Room: allocatable GPUs less requested ones
// are at least the pod's, or a pod of lower priority than this one holds
// GPUs there (preemption may free them). Every node left out is one
// NodeResourcesFit rejects and preemption cannot free; the scheduler
// reports it as not satisfying this plugin. It never narrows when the
// fabric tree cannot be read (PreScore reports that). It reads
// every node's generation, so the nodes named are those of the cycle's
// snapshot, whoever changed them.
func (pl *InferencePacking) narrow(state fwk.CycleState, pod *v1.Pod, all []fwk.NodeInfo, gpus int64) *fwk.PreFilterResult {
	if gpus <= 0 || gpus > maxNarrowGPUs || len(all) < narrowShare {
		return nil
	}
	tree, err := pl.tracker.Tree()
	if err != nil {
		return nil
	}
	limit := len(all) / narrowShare
	volatile := state.IsPodGroupSchedulingCycle()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	// The counts may be up to fullRescan old; they only decide whether
	// the exact look below is worth it.
	pl.look(tree, all, volatile, false)
	var estimate int32
	for _, n := range pl.byFree[gpus:] {
		estimate += n
	}
	if int(estimate) > limit {
		return nil
	}
	pl.look(tree, all, volatile, true)
	priority := corev1helpers.PodPriority(pod)
	n := 0
	for i := range pl.entries {
		if pl.entries[i].hasRoom(gpus, priority) {
			n++
		}
	}
	if n == 0 || n > limit {
		return nil
	}
	names := make(sets.Set[string], n)
	for i := range pl.entries {
		if e := &pl.entries[i]; e.hasRoom(gpus, priority) {
			names.Insert(e.name)
		}
	}
	return &fwk.PreFilterResult{NodeNames: names}
}

// gpuCheck is the GPUs of a pod whose room on a node this plugin may
// check as NodeResourcesFit does (narrow, Filter); 0 for a pod that asks
// for none, one already bound (a resize, which NodeResourcesFit checks
// against its own node by the change alone), or while DRA may serve
// requests for the GPU resource (a node that offers no GPUs may then fit).
func (pl *InferencePacking) gpuCheck(pod *v1.Pod) int64 {
	gpus := capacity.PodRequest(pod, pl.gpu)
	if gpus <= 0 || pod.Spec.NodeName != "" || pl.draMayServe() {
		return 0
	}
	return gpus
}

func (e *entry) hasRoom(gpus int64, priority int32) bool {
	return e.offersGPUs && (e.free >= gpus || e.lowest < priority)
}

// draMayServe says whether DRA may serve requests for the GPU resource as
// an extended resource (a DeviceClass names it): NodeResourcesFit then
// leaves a node that offers none of it to DRA.
func (pl *InferencePacking) draMayServe() bool {
	dra := pl.handle.SharedDRAManager()
	if dra == nil {
		return false
	}
	resolver := dra.DeviceClassResolver()
	return resolver != nil && resolver.GetDeviceClass(pl.gpu) != nil
}

// PreFilterExtensions returns nil: the claimed nodes do not depend on the
// pods preemption adds or removes.
func (pl *InferencePacking) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter turns away a pod that asks for GPUs from a node without room for
// them, as NodeResourcesFit would, with its reason and code, but first
// (the production profile lists this plugin first among its filters):
// the filters after it, NodeResourcesFit's check of every resource the
// pod asks for with it (of which the GPU's, by name validation, costs
// most), never run on the full nodes the scheduler crosses while it looks
// for its share of feasible ones. It reads the node it is given, so
// preemption's nodes, with victims removed or nominated pods added, are
// checked as they are. It also turns production away from the nodes a
// live research claim holds (the nodes it frees, and the nodes its
// research pods are nominated to), and any pod from an overflow node none
// of whose providers can run it as written.
func (pl *InferencePacking) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(preFilterStateKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if ni.Node() == nil {
		return nil
	}
	s, name := data.(*preFilterState), ni.Node().Name
	if s.gpus > 0 {
		total := ni.GetAllocatable().GetScalarResources()[pl.gpu]
		if s.gpus > total-ni.GetRequested().GetScalarResources()[pl.gpu] {
			code := fwk.Unschedulable
			if s.gpus > total {
				code = fwk.UnschedulableAndUnresolvable
			}
			return fwk.NewStatus(code, pl.insufficient)
		}
	}
	if why, ok := s.refuse[name]; ok {
		pl.waiting.Add(pod)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonCannotRunThere+": "+why)
	}
	if o, ok := s.overflowNodes[name]; ok && o.err == nil && !pl.overflowRoom(name, o, pod, ni, s.held) {
		pl.waiting.Add(pod)
		return fwk.NewStatus(fwk.Unschedulable, ReasonNoRoom+": no provider behind this overflow node has room for the whole pod, less what research claims hold there for the production they move")
	}
	if !s.claimed.Has(name) {
		return nil
	}
	pl.waiting.Add(pod)
	return fwk.NewStatus(fwk.Unschedulable, ReasonClaimed+": a research claim is freeing this node")
}

// overflowRoom reports whether one provider behind overflow node name
// (offer o, NodeInfo ni) has room for all of pod, as dispatch needs: its
// capacity less the pods it runs (and those bound not yet dispatched,
// counted where dispatch would put them) and less held (overflow.RoomOn).
// The count of its pods is kept until the NodeInfo or the offer changes
// (counted); the lock also keeps the ledger's memo of what each provider
// can run to one Filter at a time.
func (pl *InferencePacking) overflowRoom(name string, o nodeOffer, pod *v1.Pod, ni fwk.NodeInfo, held []overflow.Reservation) bool {
	pl.countedMu.Lock()
	defer pl.countedMu.Unlock()
	c, ok := pl.counted[name]
	if !ok || c.generation != ni.GetGeneration() || c.raw != o.raw {
		pods := make([]*v1.Pod, 0, len(ni.GetPods()))
		for _, pi := range ni.GetPods() {
			pods = append(pods, pi.GetPod())
		}
		c = countedRoom{generation: ni.GetGeneration(), raw: o.raw, room: overflow.RoomOn(name, o.offer, pods, nil)}
		if pl.counted == nil {
			pl.counted = map[string]countedRoom{}
		}
		pl.counted[name] = c
	}
	_, ok = c.room.Holding(held).Take(pod)
	return ok
}

// Name returns the plugin name.
func (pl *InferencePacking) Name() string { return Name }

// SignPod signs what the score depends on besides the cluster: the pod's
// GPU request.
func (pl *InferencePacking) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if err := pl.ready(); err != nil {
		return nil, fwk.AsStatus(err)
	}
	return []fwk.SignFragment{
		{Key: "sluice.dev/InferencePacking.GPURequest()", Value: capacity.PodRequest(pod, pl.gpu)},
		{Key: "sluice.dev/InferencePacking.Production()", Value: pl.classes.IsProduction(pod)},
	}, nil
}

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// preScoreState says where production runs in this cycle.
type preScoreState struct {
	*packingView
	gpus int64
}

// Clone returns the state: it is not changed after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore finds the nodes and leaves that run production. Between two
// cycles it rescans only the nodes Reserve or Unreserve hinted (a pointer
// and a generation compared per node), and every node once per
// fullRescan or when the node list changed, so a steady stream of pods
// costs no pass over the cluster's nodes. It skips scoring when the score
// would be the same on every candidate (sameEverywhere).
func (pl *InferencePacking) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if err := pl.ready(); err != nil {
		return fwk.AsStatus(err)
	}
	tree, err := pl.tracker.Tree()
	if err != nil {
		return fwk.AsStatus(err)
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(err)
	}
	pl.mu.Lock()
	pl.look(tree, all, state.IsPodGroupSchedulingCycle(), false)
	view := pl.view
	pl.mu.Unlock()
	s := &preScoreState{packingView: view, gpus: capacity.PodRequest(pod, pl.gpu)}
	if s.gpus == 0 && !pl.classes.IsProduction(pod) && pl.sameEverywhere(s, nodes) {
		return fwk.NewStatus(fwk.Skip)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// sameEverywhere says whether every candidate scores the same, so that
// the score orders nothing and the cycle need not run it: every node has
// the same base (the view is uniform) and the same GPU term. It is asked
// only for pods that are not production and ask for no GPUs: placing such
// a pod changes no node's score, so when the scheduler places the next
// pods alike from this cycle's ranking (opportunistic batching rescores
// only the node it last chose), their own placements never make it mix
// nodes this plugin scored with nodes it did not.
func (pl *InferencePacking) sameEverywhere(s *preScoreState, nodes []fwk.NodeInfo) bool {
	if !s.uniform {
		return false
	}
	if len(nodes) == 0 {
		return true
	}
	first := pl.gpuTerm(nodes[0], 0)
	for _, ni := range nodes[1:] {
		if pl.gpuTerm(ni, 0) != first {
			return false
		}
	}
	return true
}

// gpuTerm is the packing term of a node for a pod of gpus GPUs: 10 x its
// GPU allocation after the pod. The snapshot does not change during a
// cycle: GPUs are read from the node, not kept.
func (pl *InferencePacking) gpuTerm(ni fwk.NodeInfo, gpus int64) int64 {
	total := ni.GetAllocatable().GetScalarResources()[pl.gpu]
	if total <= 0 {
		return 0
	}
	return packTerm * min(ni.GetRequested().GetScalarResources()[pl.gpu]+gpus, total) / total
}

// Reserve hints that the node changed: the next PreScore looks at it
// again (production, and the GPUs narrow's estimate counts).
func (pl *InferencePacking) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	pl.hint(pod, nodeName)
	return nil
}

// Unreserve hints that the node changed back.
func (pl *InferencePacking) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.hint(pod, nodeName)
}

func (pl *InferencePacking) hint(pod *v1.Pod, nodeName string) {
	if pl.ready() != nil {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.hinted == nil {
		pl.hinted = sets.New[string]()
	}
	pl.hinted.Insert(nodeName)
}

// look brings the entries up to the cycle's node list (pl.mu held): every
// node when exact, the tree changed, nodes came or went, the scheduler made
// its list anew or fullRescan has passed; else the hinted nodes only.
//
// volatile: the cycle is a pod group's, whose snapshot may hold the
// group's pods assumed, and AssumePod and ForgetPod keep a NodeInfo's
// generation: what is read then is kept under no generation, so that it
// is read again once the group's pods are forgotten or bound.
func (pl *InferencePacking) look(tree *fabric.Tree, all []fwk.NodeInfo, volatile, exact bool) {
	now, full := pl.clock.Now(), true
	switch {
	case tree != pl.tree || len(all) != len(pl.entries):
		pl.rebuild(tree, all, volatile)
	case exact, len(all) > 0 && &all[0] != pl.list, now.Sub(pl.lastFull) >= fullRescan:
		pl.refresh(all, volatile)
	default:
		pl.refreshHinted(all, volatile)
		full = false
	}
	if full {
		pl.lastFull = now
	}
	pl.hinted.Clear()
	if len(all) > 0 {
		pl.list = &all[0]
	}
}

// unread is the generation an entry read in a pod group's cycle is kept
// under: no NodeInfo has it, so the next look reads the node again.
const unread = -1

// rebuild starts over: a new tree, or nodes came or went.
func (pl *InferencePacking) rebuild(tree *fabric.Tree, all []fwk.NodeInfo, volatile bool) {
	pl.tree = tree
	n := tree.NumNodes()
	pl.leafOf, pl.overflowCount, pl.nodeCount = make([]int32, n), make([]int32, n), make([]int32, n)
	leaves := map[*fabric.Domain]int32{}
	for i := range n {
		leaf := tree.Ancestor(i, min(1, tree.RootLevel()))
		id, ok := leaves[leaf]
		if !ok {
			id = int32(len(leaves))
			leaves[leaf] = id
		}
		pl.leafOf[i] = id
	}
	pl.leafCount = make([]int32, len(leaves))
	pl.byFree = make([]int32, maxNarrowGPUs+1)
	pl.outside = 0
	pl.entries = make([]entry, len(all))
	for i, ni := range all {
		e := pl.entryOf(ni, ni.GetGeneration(), volatile)
		pl.entries[i] = e
		pl.count(e, 1)
	}
	pl.indexInfos()
	pl.publish()
}

// indexInfos makes byInfo and position from the entries.
func (pl *InferencePacking) indexInfos() {
	pl.byInfo = make(map[fwk.NodeInfo]int32, len(pl.entries))
	pl.position = make(map[string]int32, len(pl.entries))
	for i, e := range pl.entries {
		if e.index >= 0 {
			pl.byInfo[e.info] = e.index
		}
		if n := e.info.Node(); n != nil {
			pl.position[n.Name] = int32(i)
		}
	}
}

// refresh updates the counts for the nodes that changed and publishes a
// new view only if a node or leaf started or stopped running production,
// or a node became or stopped being an overflow node.
func (pl *InferencePacking) refresh(all []fwk.NodeInfo, volatile bool) {
	changed, moved := false, false
	for i, ni := range all {
		c, m := pl.refreshAt(i, ni, volatile)
		changed, moved = changed || c, moved || m
	}
	pl.republish(changed, moved)
}

// refreshHinted is refresh of only the hinted nodes.
func (pl *InferencePacking) refreshHinted(all []fwk.NodeInfo, volatile bool) {
	changed, moved := false, false
	for name := range pl.hinted {
		if i, ok := pl.position[name]; ok {
			c, m := pl.refreshAt(int(i), all[i], volatile)
			changed, moved = changed || c, moved || m
		}
	}
	pl.republish(changed, moved)
}

// refreshAt looks again at position i of the node list: changed if what
// the node contributes changed, moved if the position holds another
// NodeInfo.
func (pl *InferencePacking) refreshAt(i int, ni fwk.NodeInfo, volatile bool) (changed, moved bool) {
	old, generation := pl.entries[i], ni.GetGeneration()
	if old.info == ni && old.generation == generation {
		return false, false
	}
	e := pl.entryOf(ni, generation, volatile)
	pl.entries[i] = e
	pl.count(old, -1)
	pl.count(e, 1)
	return e.index != old.index || e.production != old.production || e.overflow != old.overflow, old.info != ni
}

func (pl *InferencePacking) republish(changed, moved bool) {
	if moved {
		pl.indexInfos()
	}
	if changed || moved {
		pl.publish()
	}
}

// entryOf reads one node, of that generation (kept as unread if volatile).
func (pl *InferencePacking) entryOf(ni fwk.NodeInfo, generation int64, volatile bool) entry {
	if volatile {
		generation = unread
	}
	e := entry{info: ni, generation: generation, index: -1, lowest: math.MaxInt32}
	n := ni.Node()
	if n == nil {
		return e
	}
	e.name = n.Name
	e.offersGPUs, e.free = ni.GetAllocatable().GetScalarResources()[pl.gpu] > 0, capacity.Free(ni, pl.gpu, 0)
	inTree := false
	if i, ok := pl.tree.NodeIndex(n.Name); ok {
		inTree, e.index = true, int32(i)
		e.overflow = pl.classes.IsOverflowNode(n)
	}
	for _, p := range ni.GetPods() {
		pod := p.GetPod()
		if inTree && !e.overflow && !e.production && pl.classes.IsProduction(pod) {
			e.production = true
		}
		if priority := corev1helpers.PodPriority(pod); priority < e.lowest && p.CalculateResource().Resource.GetScalarResources()[pl.gpu] > 0 {
			e.lowest = priority
		}
	}
	return e
}

// count adds (delta 1) or removes (-1) what an entry contributes.
func (pl *InferencePacking) count(e entry, delta int32) {
	if e.offersGPUs {
		pl.byFree[min(e.free, maxNarrowGPUs)] += delta
	}
	if e.index < 0 {
		pl.outside += delta
		return
	}
	if e.overflow {
		pl.overflowCount[e.index] += delta
	}
	if e.production {
		pl.nodeCount[e.index] += delta
		pl.leafCount[pl.leafOf[e.index]] += delta
	}
}

// publish makes a new view from the counts; cycles holding the old one
// keep it.
func (pl *InferencePacking) publish() {
	v := &packingView{tree: pl.tree, byInfo: pl.byInfo, base: make([]int8, len(pl.nodeCount)), uniform: pl.outside == 0}
	for i := range v.base {
		if pl.overflowCount[i] == 0 {
			b := physicalFloor
			if pl.nodeCount[i] > 0 {
				b += nodeTerm
			}
			if pl.leafCount[pl.leafOf[i]] > 0 {
				b += leafTerm
			}
			v.base[i] = int8(b)
		}
		v.uniform = v.uniform && v.base[i] == v.base[0]
	}
	pl.view = v
}

// Score ranks nodes for production:
//
//	overflow node:  0
//	physical node:  40 + 30 if it runs production
//	                   + 20 if its leaf switch runs production
//	                   + 10 x its GPU allocation after this pod
//
// Worked example, a 1-GPU pod and 8-GPU nodes: a node running production
// with 4 GPUs taken scores 40+30+20+10*5/8 = 96; an empty node in a leaf
// that runs production scores 40+20+10*1/8 = 61; an empty node in an empty
// leaf 40+10*1/8 = 41; the overflow node 0. With the plugin's weight (10 in
// the shipped profile) an overflow node trails every physical node by 400,
// more than the other score plugins together give, so production overflows
// only when no physical node fits it.
func (pl *InferencePacking) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return pl.scoreOf(data.(*preScoreState), nodeInfo), nil
}

// scoreOf is Score's answer for a node.
func (pl *InferencePacking) scoreOf(s *preScoreState, nodeInfo fwk.NodeInfo) int64 {
	var score int64
	if i, ok := s.byInfo[nodeInfo]; ok {
		score = int64(s.base[i])
	} else if node := nodeInfo.Node(); node == nil {
		return 0
	} else if i, ok := s.tree.NodeIndex(node.Name); ok {
		// A NodeInfo the last PreScore did not see.
		score = int64(s.base[i])
	} else if !pl.classes.IsOverflowNode(node) {
		// A node newer than the fabric tree: physical, nothing known.
		score = physicalFloor
	}
	if score == 0 {
		return 0 // an overflow node
	}
	return score + pl.gpuTerm(nodeInfo, s.gpus)
}

// ScoreExtensions returns nil: scores are already in [0, 100].
func (pl *InferencePacking) ScoreExtensions() fwk.ScoreExtensions { return nil }
