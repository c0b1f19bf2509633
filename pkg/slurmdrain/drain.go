// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurmdrain tells Slurm when Kubernetes takes a node away: a
// Slurm node whose Kubernetes node is cordoned, NotReady or tainted
// NoExecute, or whose slurmd pod is being deleted, is drained with reason
// "sluice: <why>", and resumed when the cause clears. A drain whose reason
// sluice did not write is never undone. It runs on the leader only.
//
// Example: `kubectl cordon gpu07` drains gpu07 in Slurm with reason
// "sluice: cordoned in Kubernetes" (running jobs finish, no new job
// starts); `kubectl uncordon gpu07` resumes it. An admin's
// `scontrol update nodename=gpu07 state=drain reason=bad-hca` is left as it
// is, cordoned or not.
package slurmdrain

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/slurm"
)

// ReasonPrefix starts the reason of every drain sluice writes; only such
// drains are resumed.
const ReasonPrefix = "sluice:"

// Event reasons on the Node.
const (
	ReasonDrained     = "SlurmNodeDrained"
	ReasonResumed     = "SlurmNodeResumed"
	ReasonWriteFailed = "SlurmWriteFailed"
)

// reasonNotReady is the drain reason of a node whose Ready condition is
// not True.
const reasonNotReady = ReasonPrefix + " NotReady in Kubernetes"

// massNotReady is the share of Slurm nodes NotReady at once above which
// NotReady no longer drains: that is Kubernetes losing sight of the nodes
// (an apiserver or network partition), not the nodes failing, and
// draining all of Slurm for it would stop every job's successor (as
// kube-controller-manager stops evicting in a zone that unhealthy).
const massNotReady = 0.55

// Config is what a Controller needs.
type Config struct {
	// Informers give Nodes and Pods (the scheduler's).
	Informers informers.SharedInformerFactory
	// View is the scheduler's Slurm view: the nodes' Slurm state and
	// names.
	View *slurm.View
	// Writer drains and resumes.
	Writer slurm.NodeWriter
	// SlurmdPods selects slurmd pods (nil or empty: none), in
	// SlurmdNamespaces only.
	SlurmdPods       labels.Selector
	SlurmdNamespaces sets.Set[string]
	// WritesPerSecond bounds the writes to Slurm.
	WritesPerSecond int32
	// Recorder records Events on Nodes (nil: none).
	Recorder events.EventRecorder
}

// Controller drains and resumes Slurm nodes as Kubernetes takes them away
// and gives them back.
type Controller struct {
	cfg     Config
	nodes   corelisters.NodeLister
	queue   workqueue.TypedRateLimitingInterface[string]
	limiter *rate.Limiter

	mu sync.Mutex
	// deleting are the slurmd pods being deleted, by node.
	deleting map[string]map[types.UID]string
	// written is the last write per Slurm node and the snapshot it was
	// judged on: the same write is not sent again until a newer snapshot
	// shows whether it took.
	written map[string]write
	// notReady caches the share of Slurm nodes NotReady for a second.
	notReady   float64
	notReadyAt time.Time
	heldLogged bool
}

type write struct {
	action string
	snap   *slurm.Snapshot
}

// New builds a controller; Run starts it.
func New(cfg Config) *Controller {
	if cfg.WritesPerSecond <= 0 {
		cfg.WritesPerSecond = 5
	}
	return &Controller{
		cfg:      cfg,
		nodes:    cfg.Informers.Core().V1().Nodes().Lister(),
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "sluice-slurm-drain"}),
		limiter:  rate.NewLimiter(rate.Limit(cfg.WritesPerSecond), int(cfg.WritesPerSecond)),
		deleting: map[string]map[types.UID]string{},
		written:  map[string]write{},
	}
}

// Run drains and resumes until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithName("slurm-drain")
	ctx = klog.NewContext(ctx, logger)
	nodeInf := c.cfg.Informers.Core().V1().Nodes().Informer()
	podInf := c.cfg.Informers.Core().V1().Pods().Informer()
	enqueueNode := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			c.queue.Add(n.Name)
		} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			c.queue.Add(t.Key) // a Node's key is its name
		}
	}
	reg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueNode, UpdateFunc: func(_, o any) { enqueueNode(o) }, DeleteFunc: enqueueNode,
	})
	if err != nil {
		logger.Error(err, "Slurm drains cannot watch nodes")
		return
	}
	defer func() { _ = nodeInf.RemoveEventHandler(reg) }()
	if c.cfg.SlurmdPods != nil && !c.cfg.SlurmdPods.Empty() {
		reg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.observePod,
			UpdateFunc: func(_, o any) { c.observePod(o) },
			DeleteFunc: c.forgetPod,
		})
		if err != nil {
			logger.Error(err, "Slurm drains cannot watch slurmd pods")
			return
		}
		defer func() { _ = podInf.RemoveEventHandler(reg) }()
	}
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced, podInf.HasSynced) {
		return
	}
	// A new snapshot (or Slurm's state turning current again) may show a
	// drain taken or undone by someone else, or one of ours that did not
	// take.
	c.cfg.View.OnChange(func() { c.enqueueAll() })
	c.enqueueAll()
	logger.Info("Slurm drains running", "writesPerSecond", c.cfg.WritesPerSecond)
	go wait.UntilWithContext(ctx, c.work, time.Second)
	<-ctx.Done()
}

func (c *Controller) enqueueAll() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
}

// observePod follows slurmd pods being deleted.
func (c *Controller) observePod(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" || !c.cfg.SlurmdNamespaces.Has(p.Namespace) || !c.cfg.SlurmdPods.Matches(labels.Set(p.Labels)) {
		return
	}
	c.mu.Lock()
	byUID := c.deleting[p.Spec.NodeName]
	if p.DeletionTimestamp != nil {
		if byUID == nil {
			byUID = map[types.UID]string{}
			c.deleting[p.Spec.NodeName] = byUID
		}
		byUID[p.UID] = p.Namespace + "/" + p.Name
	} else if byUID != nil {
		delete(byUID, p.UID)
	}
	c.mu.Unlock()
	c.queue.Add(p.Spec.NodeName)
}

func (c *Controller) forgetPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	c.mu.Lock()
	if byUID := c.deleting[p.Spec.NodeName]; byUID != nil {
		delete(byUID, p.UID)
		if len(byUID) == 0 {
			delete(c.deleting, p.Spec.NodeName)
		}
	}
	c.mu.Unlock()
	c.queue.Add(p.Spec.NodeName)
}

func (c *Controller) work(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.Sync(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Slurm drain sync failed; retrying", "node", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// Sync brings one Kubernetes node's Slurm node in line: drained with
// sluice's reason while Kubernetes has taken the node away, resumed
// (only from sluice's own drain) when it gives it back. It acts only on a
// current snapshot of Slurm, and reads Slurm again right before it writes:
// the snapshot may predate an admin's drain, which a drain of sluice's
// would overwrite (Slurm keeps one reason) and a resume would undo.
func (c *Controller) Sync(ctx context.Context, nodeName string) error {
	node, err := c.nodes.Get(nodeName)
	if err != nil {
		// A deleted node's Slurm node is left as it is.
		return nil
	}
	name := c.cfg.View.SlurmName(node)
	snap, action := c.decide(ctx, node, name)
	if action == "" || c.sent(name, action, snap) {
		return nil
	}
	if err := c.cfg.View.Refresh(ctx); err != nil {
		return err
	}
	if snap, action = c.decide(ctx, node, name); action == "" || c.sent(name, action, snap) {
		return nil
	}
	if action == actionResume {
		return c.write(ctx, node, name, snap, action, func() error { return c.cfg.Writer.ResumeNode(ctx, name) })
	}
	return c.write(ctx, node, name, snap, action, func() error { return c.cfg.Writer.DrainNode(ctx, name, action) })
}

// actionResume is decide's answer for a resume; a drain is its reason.
const actionResume = "resume"

// decide says what the Slurm node needs on the current snapshot: a drain
// (its reason), a resume, or nothing ("").
func (c *Controller) decide(ctx context.Context, node *v1.Node, name string) (*slurm.Snapshot, string) {
	r := c.cfg.View.Read(klog.FromContext(ctx))
	if r.Snap == nil || r.Stale || r.Open {
		return nil, "" // acted on when Slurm's state is current again
	}
	sn, ok := r.Snap.Nodes[name]
	if !ok || sn.Unreadable {
		return r.Snap, ""
	}
	why := c.why(node)
	drained := sn.Has("DRAIN")
	ours := strings.HasPrefix(sn.Reason, ReasonPrefix)
	switch {
	case why != "" && (!drained || (ours && sn.Reason != why)):
		if why == reasonNotReady && c.massNotReady(ctx, r.Snap) {
			return r.Snap, ""
		}
		return r.Snap, why
	case why == "" && drained && ours:
		return r.Snap, actionResume
	}
	return r.Snap, ""
}

// sent says whether this write was sent already, judged on this snapshot.
func (c *Controller) sent(name, action string, snap *slurm.Snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.written[name]
	return ok && last.action == action && last.snap == snap
}

// write sends one write within the rate limit and remembers it.
func (c *Controller) write(ctx context.Context, node *v1.Node, name string, snap *slurm.Snapshot, action string, send func() error) error {
	if err := c.limiter.Wait(ctx); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if err := send(); err != nil {
		logger.Error(err, "Slurm write failed", "node", klog.KObj(node), "slurmNode", name, "action", action)
		c.event(node, v1.EventTypeWarning, ReasonWriteFailed, "Drain", "could not %s Slurm node %s: %v", verb(action), name, err)
		return err
	}
	c.mu.Lock()
	c.written[name] = write{action: action, snap: snap}
	c.mu.Unlock()
	if action == actionResume {
		logger.Info("Resumed Slurm node: Kubernetes gave it back", "node", klog.KObj(node), "slurmNode", name)
		c.event(node, v1.EventTypeNormal, ReasonResumed, "Resume", "resumed Slurm node %s: Kubernetes uses the node again", name)
		return nil
	}
	logger.Info("Drained Slurm node: Kubernetes took it away", "node", klog.KObj(node), "slurmNode", name, "reason", action)
	c.event(node, v1.EventTypeNormal, ReasonDrained, "Drain", "drained Slurm node %s with reason %q", name, action)
	return nil
}

func verb(action string) string {
	if action == actionResume {
		return "resume"
	}
	return "drain"
}

func (c *Controller) event(node *v1.Node, eventType, reason, action, format string, args ...any) {
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Eventf(node, nil, eventType, reason, action, format, args...)
	}
}

// why says why Kubernetes has taken the node away, as the drain reason
// ("" when it has not).
func (c *Controller) why(node *v1.Node) string {
	if node.Spec.Unschedulable {
		return ReasonPrefix + " cordoned in Kubernetes"
	}
	if !overflow.NodeReady(node) {
		return reasonNotReady
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoExecute {
			return fmt.Sprintf("%s tainted %s:NoExecute in Kubernetes", ReasonPrefix, t.Key)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pod := range c.deleting[node.Name] {
		return fmt.Sprintf("%s slurmd pod %s is being deleted", ReasonPrefix, pod)
	}
	return ""
}

// massNotReady says whether so many of Slurm's nodes are NotReady that
// NotReady must not drain (see massNotReady), logging it once per spell.
func (c *Controller) massNotReady(ctx context.Context, snap *slurm.Snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.notReadyAt) > time.Second {
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return true
		}
		slurmNodes, notReady := 0, 0
		for _, n := range nodes {
			if _, ok := snap.Nodes[c.cfg.View.SlurmName(n)]; !ok {
				continue
			}
			slurmNodes++
			if !overflow.NodeReady(n) {
				notReady++
			}
		}
		c.notReady, c.notReadyAt = 0, time.Now()
		if slurmNodes > 0 {
			c.notReady = float64(notReady) / float64(slurmNodes)
		}
	}
	held := c.notReady > massNotReady
	if held && !c.heldLogged {
		klog.FromContext(ctx).Info("Most Slurm nodes are NotReady in Kubernetes: not draining them for it (Kubernetes has likely lost sight of them)", "notReadyShare", c.notReady, "threshold", massNotReady)
	}
	c.heldLogged = held
	return held
}
