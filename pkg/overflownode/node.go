// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflownode is sluice-overflow-node: a virtual-kubelet node standing
// for the capacity of every external GPU provider (pkg/overflownode/provider),
// that runs the pods bound to it at those providers.
//
// Everything that is not a provider's job is here, written once:
// dispatch (providers in order of priority, then price, with room for the
// pod), periodic reconciliation of the providers' listings against the
// pods bound to the node, translation of remote state into pod status
// (Ready only when the remote side serves), garbage collection of remote
// workloads whose pod is gone, failure handling (a pod whose remote
// workload failed or vanished, or whose provider has been down too long,
// is marked Failed so that its controller replaces it), and the node's
// capacity and conditions (the sum of the healthy providers; Ready=False
// when none is healthy, so that sluice stops evicting into it).
//
// It keeps no state of its own: which provider runs a pod is in the
// providers' listings (every remote workload carries its pod's namespace,
// name and UID, and an id derived from the UID) and in the pod's own
// status (condition overflow.sluice.dev/RemoteWorkload), so a restarted
// process continues where the last one stopped.
package overflownode

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// RemoteCondition is the pod condition naming the provider and id that run
// the pod; its presence also means "this pod was dispatched", which tells
// a vanished remote workload from one not created yet.
const RemoteCondition = offer.ProviderCondition

// Pod failure reasons (pod status reason, event reason, metric label).
const (
	ReasonRemoteFailed        = "RemoteWorkloadFailed"
	ReasonRemoteLost          = "RemoteWorkloadLost"
	ReasonProviderUnavailable = "ProviderUnavailable"
	ReasonProviderRemoved     = "ProviderRemoved"
	// ReasonCannotRun: no provider can run the pod as written.
	ReasonCannotRun = "NoProviderCanRunPod"
	// ReasonDispatchTimeout: no provider started the pod within the
	// dispatch timeout.
	ReasonDispatchTimeout = "DispatchTimeout"
)

// Member is one configured provider.
type Member struct {
	Config   ProviderConfig
	Provider provider.Provider

	// Guarded by Node.mu. healthy: it takes new work (its health,
	// listing and capacity calls answer); since is the last change of
	// healthy. unlistedSince is when its listing last began to fail (zero
	// while it lists): only then are its pods' workloads unknown.
	healthy       bool
	since         time.Time
	listed        bool // its last listing answered
	unlistedSince time.Time
	// goneSaid: the node's ProviderGone Event for this outage is out.
	goneSaid bool
	err      error
	capacity v1.ResourceList // quota applied
}

// remote is one remote workload as last listed (or just created).
type remote struct {
	member  *Member
	w       provider.Workload
	created time.Time // set when this process created it
	started bool      // its time to Ready was observed
	// Of a warm instance not adopted: its victim's requests (it has no
	// pod bound here to read them from), what a replacement must share
	// with its victim to adopt it (learnt from the claims; kept when the
	// claim ends before the replacement comes), and when this process
	// first listed it.
	requests v1.ResourceList
	match    *warmMatch
	seen     time.Time
}

// Node is the overflow node's provider logic, plugged into
// virtual-kubelet's pod and node controllers.
type Node struct {
	cfg      *Config
	members  []*Member // dispatch order
	client   kubernetes.Interface
	pods     corelisters.PodLister
	recorder record.EventRecorder
	now      func() time.Time

	mu        sync.Mutex
	workloads map[types.UID]*remote
	lost      map[types.UID]int
	// waiting is when this process first saw each pod it has not
	// dispatched (the dispatch timeout runs from then).
	waiting map[types.UID]time.Time
	// metered is when GPU use was last metered.
	metered time.Time
	// refsSent is, per pod, the Secrets and ConfigMaps (names and
	// resourceVersions) its provider was last given; a change is passed
	// on. Empty after a restart: every pod's are passed on once.
	refsSent map[types.UID]string
	// held are the pods waiting for a Secret, ConfigMap or key they read,
	// since when; the reconcile dispatches them once it exists.
	held map[types.UID]time.Time
	// dispatching are the pods a CreatePod call is dispatching now.
	dispatching map[types.UID]bool
	// claims are what warm instances are started for (nil: none are).
	claims ClaimSource
	// warm are the warm instances not adopted, by victim UID, as last
	// listed (or just created).
	warm map[types.UID]*remote
	// adopting are the warm instances (by id) being adopted now.
	adopting map[string]bool
	// warmSent is, per victim, the WarmCondition status and reason last
	// set; warmFinal the victims not to warm again.
	warmSent  map[types.UID]string
	warmFinal map[types.UID]bool
	// kubeletDone is closed when the kubelet API server has stopped (nil
	// without one).
	kubeletDone chan struct{}
	// budgets pace the evictions of pods at a gone provider (nil: they
	// are failed at once); retiring are those whose first wait for a
	// budget was said in an Event.
	budgets    budgets
	retiring   map[types.UID]bool
	notifyPod  func(*v1.Pod)
	notifyNode func(*v1.Node)
	lastNode   *v1.NodeStatus
	lastOffer  string
	// usageMeter is the providers' usage measures (usage.go).
	usageMeter meter
}

var (
	_ node.PodLifecycleHandler = &Node{}
	_ node.PodNotifier         = &Node{}
	_ node.NodeProvider        = &Node{}
)

// New builds a node; pods lists the pods bound to this node.
func New(cfg *Config, members []*Member, client kubernetes.Interface, pods corelisters.PodLister, recorder record.EventRecorder) *Node {
	ordered := append([]*Member(nil), members...)
	sort.SliceStable(ordered, func(i, j int) bool {
		a, b := ordered[i].Config, ordered[j].Config
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if a.PricePerGPUHour != b.PricePerGPUHour {
			return a.PricePerGPUHour < b.PricePerGPUHour
		}
		return a.Name < b.Name
	})
	return &Node{cfg: cfg, members: ordered, client: client, pods: pods, recorder: recorder, now: time.Now,
		workloads: map[types.UID]*remote{}, lost: map[types.UID]int{}, waiting: map[types.UID]time.Time{}, refsSent: map[types.UID]string{}, held: map[types.UID]time.Time{}, dispatching: map[types.UID]bool{},
		warm: map[types.UID]*remote{}, adopting: map[string]bool{}, warmSent: map[types.UID]string{}, warmFinal: map[types.UID]bool{}, retiring: map[types.UID]bool{}}
}

func (n *Node) member(name string) *Member {
	for _, m := range n.members {
		if m.Config.Name == name {
			return m
		}
	}
	return nil
}

// CreatePod dispatches the pod to the first provider, in dispatch order,
// that is healthy, has room for it and accepts it.
func (n *Node) CreatePod(ctx context.Context, pod *v1.Pod) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	n.mu.Lock()
	if r := n.workloads[pod.UID]; r != nil {
		// Already running somewhere (e.g. created before a restart).
		n.mu.Unlock()
		n.sendStatus(pod, n.statusFor(pod, r))
		return nil
	}
	if dispatchedTo(pod) != "" {
		// It ran before and its workload is gone: the reconcile marks it
		// Failed (a vanished container is not silently re-run).
		n.mu.Unlock()
		return nil
	}
	if n.dispatching[pod.UID] {
		// virtual-kubelet and the reconcile (for a held pod) may both
		// ask: one dispatch at a time, the other's answer stands.
		n.mu.Unlock()
		return nil
	}
	n.dispatching[pod.UID] = true
	defer func() {
		n.mu.Lock()
		delete(n.dispatching, pod.UID)
		n.mu.Unlock()
	}()
	n.mu.Unlock()
	if r := n.adoptWarm(ctx, pod); r != nil {
		n.sendStatus(pod, n.statusFor(pod, r))
		return nil
	}
	n.mu.Lock()
	candidates, skipped, cannot := n.candidates(pod)
	n.mu.Unlock()

	var refs provider.Refs
	var fingerprint string
	if len(candidates) > 0 {
		var err error
		readCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		refs, fingerprint, err = newRefReader(n.client).read(readCtx, pod)
		cancel()
		var missing *missingRef
		if errors.As(err, &missing) {
			// Held back until it exists, as kubelet holds such a pod:
			// the reconcile tries again (an error here would have
			// virtual-kubelet overwrite the status with ProviderFailed).
			n.mu.Lock()
			if _, ok := n.held[pod.UID]; !ok {
				n.held[pod.UID] = n.now()
			}
			delete(n.waiting, pod.UID) // the dispatch timeout runs from when it has them
			n.mu.Unlock()
			n.recorder.Event(pod, v1.EventTypeWarning, missing.reason(), missing.msg)
			n.sendStatus(pod, n.heldBack(pod, missing))
			return nil
		}
		if err != nil {
			n.recorder.Event(pod, v1.EventTypeWarning, "DispatchFailed", err.Error())
			return err
		}
	}
	id := provider.IDFor(pod.UID)
	m, refused := n.createAt(ctx, candidates, id, pod, refs)
	reasons := append(skipped, refused...)
	if m != nil {
		r := &remote{member: m, created: n.now(), w: provider.Workload{
			ID: id, Node: n.cfg.NodeName, Phase: provider.Pending, Message: "created at the provider",
			Pod: provider.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		}}
		n.mu.Lock()
		n.workloads[pod.UID] = r
		delete(n.held, pod.UID)
		if fingerprint != "" {
			n.refsSent[pod.UID] = fingerprint
		}
		n.mu.Unlock()
		n.recorder.Eventf(pod, v1.EventTypeNormal, "Dispatched", "Running at provider %s as %s", m.Config.Name, id)
		logger.V(2).Info("Dispatched pod", "provider", m.Config.Name, "id", id)
		n.sendStatus(pod, n.statusFor(pod, r))
		return nil
	}
	if cannot == len(n.members) {
		// No provider will ever run it as written: fail it now, so its
		// controller replaces it (and the scheduler, which reads what
		// each provider carries, binds the replacement elsewhere).
		n.fail(pod, ReasonCannotRun, "no provider can run this pod as written: "+strings.Join(reasons, "; "))
		return nil
	}
	msg := "no provider can run this pod now"
	if len(reasons) > 0 {
		msg += ": " + strings.Join(reasons, "; ")
	}
	n.recorder.Event(pod, v1.EventTypeWarning, "DispatchFailed", msg)
	return errors.New(msg)
}

// createAt creates the workload id running pod at the first of
// candidates that takes it, and returns that one, and why the others
// before it refused.
func (n *Node) createAt(ctx context.Context, candidates []*Member, id string, pod *v1.Pod, refs provider.Refs) (*Member, []string) {
	var reasons []string
	for _, m := range candidates {
		callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		err := m.Provider.Create(callCtx, id, pod, refs)
		cancel()
		if err == nil {
			return m, reasons
		}
		reason := "error"
		if errors.Is(err, provider.ErrUnsupported) {
			// Refused now (a remote admission or quota answer may
			// clear): the dispatch timeout decides, not this.
			reason = "unsupported"
		}
		metrics.DispatchFailures.WithLabelValues(m.Config.Name, reason).Inc()
		reasons = append(reasons, fmt.Sprintf("%s: %v", m.Config.Name, err))
		klog.FromContext(ctx).V(2).Info("Provider refused the pod", "pod", klog.KObj(pod), "id", id, "provider", m.Config.Name, "err", err)
	}
	return nil, reasons
}

// candidates are the healthy providers with room for pod that can run it,
// in dispatch order; skipped says why the others were passed over, and
// cannot counts those that can never run it as written (what they carry,
// or their whole capacity). Called with n.mu.
func (n *Node) candidates(pod *v1.Pod) ([]*Member, []string, int) {
	used := n.usedLocked()
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var out []*Member
	var skipped []string
	cannot := 0
	for _, m := range n.members {
		carries := m.Provider.Carries()
		var never error
		switch policy := (offer.Provider{Name: m.Config.Name, Namespaces: m.Config.Namespaces}); {
		case policy.Admits(pod.Namespace) != nil:
			// Its namespaces: neither dispatched nor warmed there.
			never = policy.Admits(pod.Namespace)
		case m.capacity != nil:
			// What it carries, and its whole capacity once known: it
			// can never hold a bigger pod.
			never = offer.Provider{Name: m.Config.Name, Capacity: m.capacity, Carries: &carries}.CanRun(pod)
		default:
			never = offer.Portable(pod, carries)
		}
		if never != nil {
			metrics.DispatchFailures.WithLabelValues(m.Config.Name, "unsupported").Inc()
			skipped = append(skipped, fmt.Sprintf("%s: %s", m.Config.Name, strings.TrimPrefix(offer.Why(never), "provider "+m.Config.Name+": ")))
			cannot++
			continue
		}
		if !m.healthy {
			metrics.DispatchFailures.WithLabelValues(m.Config.Name, "unhealthy").Inc()
			skipped = append(skipped, fmt.Sprintf("%s: unhealthy (%v)", m.Config.Name, m.err))
			continue
		}
		if short := shortfall(m.capacity, used[m], want); short != "" {
			metrics.DispatchFailures.WithLabelValues(m.Config.Name, "no_room").Inc()
			skipped = append(skipped, fmt.Sprintf("%s: no room (%s)", m.Config.Name, short))
			continue
		}
		out = append(out, m)
	}
	return out, skipped, cannot
}

// usedLocked sums the requests of the pods each provider runs, and of
// the warm instances not adopted yet.
func (n *Node) usedLocked() map[*Member]v1.ResourceList {
	byUID := n.podsByUID()
	used := map[*Member]v1.ResourceList{}
	add := func(m *Member, requests v1.ResourceList) {
		sum := used[m]
		if sum == nil {
			sum = v1.ResourceList{}
			used[m] = sum
		}
		for name, q := range requests {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	for uid, r := range n.workloads {
		pod := byUID[uid]
		if pod == nil || terminal(pod) {
			continue
		}
		add(r.member, resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	}
	for _, r := range n.warm {
		add(r.member, r.requests)
	}
	return used
}

// shortfall names the first resource pod wants more of than is free, or
// "". A provider limits what it reports; CPU, memory and storage it does
// not report are not limited, any other resource (GPUs) it does not report
// it does not have.
func shortfall(capacity, used, want v1.ResourceList) string {
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, s := range names {
		name := v1.ResourceName(s)
		q := want[name]
		if q.IsZero() {
			continue
		}
		capQ, ok := capacity[name]
		if !ok {
			switch name {
			case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
				continue
			}
			return fmt.Sprintf("needs %s %s, has none", q.String(), name)
		}
		free := capQ.DeepCopy()
		if u, ok := used[name]; ok {
			free.Sub(u)
		}
		if free.Cmp(q) < 0 {
			if free.Sign() < 0 {
				free = resource.Quantity{}
			}
			return fmt.Sprintf("needs %s %s, %s free", q.String(), name, free.String())
		}
	}
	return ""
}

// UpdatePod has nothing to do: remote workloads are not updated in place
// (a changed pod template makes a new pod).
func (n *Node) UpdatePod(context.Context, *v1.Pod) error { return nil }

// DeletePod deletes the remote workload and reports the pod terminated, so
// that virtual-kubelet removes it from the apiserver.
func (n *Node) DeletePod(ctx context.Context, pod *v1.Pod) error {
	id := provider.IDFor(pod.UID)
	n.mu.Lock()
	r := n.workloads[pod.UID]
	n.mu.Unlock()
	targets := n.members
	if r != nil {
		targets, id = []*Member{r.member}, r.w.ID // an adopted warm instance keeps its id
	}
	for _, m := range targets {
		if n.unlistedFor(m, n.now()) >= n.cfg.ProviderFailureTimeout() {
			// Gone (the pod was evicted for it): the delete would fail
			// until it returns; garbage collection deletes the workload
			// if it ever lists it again.
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
		err := m.Provider.Delete(callCtx, id)
		cancel()
		if err != nil && r != nil {
			return fmt.Errorf("deleting %s at provider %s: %w", id, m.Config.Name, err)
		}
		// Without a known provider this is best effort: garbage
		// collection deletes whatever a provider lists for a gone pod.
	}
	n.mu.Lock()
	delete(n.workloads, pod.UID)
	delete(n.lost, pod.UID)
	n.mu.Unlock()
	if !terminal(pod) {
		n.sendStatus(pod, terminatedStatus(pod, v1.PodSucceeded, "Terminated", "deleted", 0))
	}
	return nil
}

// GetPod returns the pod with its remote status, or NotFound when no
// provider runs it.
func (n *Node) GetPod(_ context.Context, namespace, name string) (*v1.Pod, error) {
	pod, err := n.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil, errdefs.NotFoundf("pod %s/%s: %v", namespace, name, err)
	}
	n.mu.Lock()
	r := n.workloads[pod.UID]
	n.mu.Unlock()
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s runs at no provider", namespace, name)
	}
	out := pod.DeepCopy()
	out.Status = n.statusFor(pod, r)
	return out, nil
}

// GetPodStatus returns the pod's remote status.
func (n *Node) GetPodStatus(ctx context.Context, namespace, name string) (*v1.PodStatus, error) {
	pod, err := n.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every remote workload as a pod (namespace, name, UID);
// virtual-kubelet deletes those whose pod no longer exists.
func (n *Node) GetPods(context.Context) ([]*v1.Pod, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*v1.Pod, 0, len(n.workloads))
	for _, r := range n.workloads {
		pod := &v1.Pod{}
		pod.Namespace, pod.Name, pod.UID = r.w.Pod.Namespace, r.w.Pod.Name, r.w.Pod.UID
		pod.Spec.NodeName = n.cfg.NodeName
		out = append(out, pod)
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's status callback.
func (n *Node) NotifyPods(_ context.Context, cb func(*v1.Pod)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notifyPod = cb
}

// Ping reports this process alive; provider health is in the node's
// conditions, not in its heartbeat.
func (n *Node) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus registers virtual-kubelet's node status callback.
func (n *Node) NotifyNodeStatus(_ context.Context, cb func(*v1.Node)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notifyNode = cb
}

// sendStatus hands a pod status to virtual-kubelet when it differs from
// the pod's.
func (n *Node) sendStatus(pod *v1.Pod, status v1.PodStatus) {
	if statusEqual(pod.Status, status) {
		return
	}
	n.mu.Lock()
	cb := n.notifyPod
	n.mu.Unlock()
	if cb == nil {
		return
	}
	out := pod.DeepCopy()
	out.Status = status
	cb(out)
}

// fail marks a pod Failed so that its controller replaces it.
func (n *Node) fail(pod *v1.Pod, reason, msg string) {
	metrics.PodsFailed.WithLabelValues(reason).Inc()
	n.recorder.Event(pod, v1.EventTypeWarning, reason, msg)
	n.sendStatus(pod, terminatedStatus(pod, v1.PodFailed, reason, msg, 137))
}

// podsByUID indexes the pods bound to this node.
func (n *Node) podsByUID() map[types.UID]*v1.Pod {
	pods, err := n.pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		out[p.UID] = p
	}
	return out
}

// dispatchedTo is the provider named in the pod's RemoteCondition.
func dispatchedTo(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == RemoteCondition {
			return c.Reason
		}
	}
	return ""
}

func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}
