// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package nodesim plays the kubelet of simulated nodes: pods bound to them
// become Running and Ready, pods deleted from them are confirmed gone, and
// the nodes report Ready. Tests and the demo use it where a real kubelet
// would run containers; the scheduler, controllers and apiserver are real.
package nodesim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Options configure a Simulator.
type Options struct {
	// Skip selects nodes the simulator leaves alone, e.g. overflow nodes
	// that a real virtual-kubelet serves. Nil skips none.
	Skip labels.Selector
	// StartupDelay is how long a bound pod stays Pending before it is
	// Running and Ready, as a container start would take.
	StartupDelay time.Duration
	// Workers is the number of pods updated in parallel (default 4).
	Workers int
	// Kubelet serves the kubelet's container log endpoint for the
	// simulated nodes (https on a loopback port, published as their
	// InternalIP and kubelet endpoint), so `kubectl logs` works: each
	// container's log is one line saying it started.
	Kubelet bool
}

// Simulator is a running node simulator.
type Simulator struct {
	client kubernetes.Interface
	opts   Options
	nodes  cache.Indexer
	pods   cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]

	// kubeletPort is the port of the log endpoint (Options.Kubelet).
	kubeletPort int32
	// lastIP numbers the pod IPs handed out, one per pod.
	lastIP atomic.Uint32

	// bound is when the simulator first saw each pending pod bound: the
	// PodScheduled condition's time has whole seconds only, which would
	// cut a sub-second startup delay to anything from 0 to itself.
	mu    sync.Mutex
	bound map[types.UID]time.Time
}

// Start runs a simulator until ctx ends and returns once its informers have
// synced.
func Start(ctx context.Context, client kubernetes.Interface, opts Options) (*Simulator, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Skip == nil {
		opts.Skip = labels.Nothing()
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	nodeInformer := factory.Core().V1().Nodes().Informer()
	s := &Simulator{
		client: client,
		opts:   opts,
		nodes:  nodeInformer.GetIndexer(),
		pods:   podInformer.GetIndexer(),
		bound:  map[types.UID]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodesim"}),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				s.forget(p.UID)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	if opts.Kubelet {
		port, err := s.serveKubelet(ctx)
		if err != nil {
			return nil, fmt.Errorf("nodesim kubelet endpoint: %w", err)
		}
		s.kubeletPort = port
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("nodesim informer for %v did not sync", typ)
		}
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for i := 0; i < opts.Workers; i++ {
		go func() {
			for s.processNext(ctx) {
			}
		}()
	}
	return s, nil
}

func (s *Simulator) processNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	requeueAfter, err := s.sync(ctx, key)
	switch {
	case err != nil:
		klog.FromContext(ctx).V(2).Info("nodesim: retrying", "key", key, "err", err)
		s.queue.AddRateLimited(key)
	case requeueAfter > 0:
		s.queue.Forget(key)
		s.queue.AddAfter(key, requeueAfter)
	default:
		s.queue.Forget(key)
	}
	return true
}

// sync handles a pod key ("ns/name") or a node key ("name").
func (s *Simulator) sync(ctx context.Context, key string) (time.Duration, error) {
	if obj, ok, _ := s.nodes.GetByKey(key); ok {
		return 0, s.syncNode(ctx, obj.(*v1.Node))
	}
	obj, ok, _ := s.pods.GetByKey(key)
	if !ok {
		return 0, nil
	}
	pod := obj.(*v1.Pod)
	if pod.Spec.NodeName == "" || !s.manages(pod.Spec.NodeName) {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		// The kubelet confirms a deletion once the containers are gone:
		// at once, or, for a pod that asks for it, when its grace period
		// ends (a server draining its requests).
		if wait := time.Until(pod.DeletionTimestamp.Time); pod.Annotations[GracefulAnnotation] == "true" && wait > 0 {
			return wait, nil
		}
		err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil
		}
		return 0, err
	}
	if pod.Status.Phase != v1.PodPending && pod.Status.Phase != "" {
		s.forget(pod.UID)
		return 0, nil
	}
	if wait := s.opts.StartupDelay - time.Since(s.boundAt(pod)); wait > 0 {
		return wait, nil
	}
	if err := s.markRunning(ctx, pod); err != nil {
		return 0, err
	}
	s.forget(pod.UID)
	return 0, nil
}

// boundAt is when the simulator first saw the pod bound.
func (s *Simulator) boundAt(pod *v1.Pod) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.bound[pod.UID]
	if !ok {
		at = time.Now()
		s.bound[pod.UID] = at
	}
	return at
}

func (s *Simulator) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.bound, uid)
	s.mu.Unlock()
}

func (s *Simulator) manages(nodeName string) bool {
	obj, ok, _ := s.nodes.GetByKey(nodeName)
	if !ok {
		return false
	}
	return !s.opts.Skip.Matches(labels.Set(obj.(*v1.Node).Labels))
}

// GracefulAnnotation, set to "true" on a pod, makes the simulator keep it
// terminating for its whole grace period, as a server that drains its
// requests does (other pods go at once).
const GracefulAnnotation = "nodesim.sluice.dev/graceful"

// CrashLoopAnnotation, set to "true" on a pod, makes the simulator run it
// as a crash-looping container: Running, never Ready.
const CrashLoopAnnotation = "nodesim.sluice.dev/crash-loop"

func (s *Simulator) markRunning(ctx context.Context, pod *v1.Pod) error {
	now := metav1.Now()
	crashing := pod.Annotations[CrashLoopAnnotation] == "true"
	pod = pod.DeepCopy()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.HostIP = "10.0.0.1"
	pod.Status.HostIPs = []v1.HostIP{{IP: "10.0.0.1"}}
	n := s.lastIP.Add(1)
	ip := fmt.Sprintf("10.%d.%d.%d", 1+(n>>16)%250, (n>>8)%256, n%256)
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []v1.PodIP{{IP: ip}}
	for _, t := range []v1.PodConditionType{v1.PodInitialized, v1.PodReadyToStartContainers, v1.ContainersReady, v1.PodReady} {
		status := v1.ConditionTrue
		if crashing && (t == v1.ContainersReady || t == v1.PodReady) {
			status = v1.ConditionFalse
		}
		setPodCondition(&pod.Status, v1.PodCondition{Type: t, Status: status, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		cs := v1.ContainerStatus{
			Name:    c.Name,
			Image:   c.Image,
			Ready:   true,
			Started: ptr.To(true),
			State:   v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		}
		if crashing {
			cs.Ready, cs.Started, cs.RestartCount = false, ptr.To(false), 5
			cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func setPodCondition(status *v1.PodStatus, c v1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}

// syncNode makes a managed node report Ready once; tests that need a
// NotReady node set the condition themselves and the simulator leaves an
// explicit Ready=False alone.
func (s *Simulator) syncNode(ctx context.Context, node *v1.Node) error {
	if s.opts.Skip.Matches(labels.Set(node.Labels)) {
		return nil
	}
	hasReady := false
	for _, c := range node.Status.Conditions {
		hasReady = hasReady || c.Type == v1.NodeReady
	}
	endpoint := s.kubeletPort == 0 || node.Status.DaemonEndpoints.KubeletEndpoint.Port == s.kubeletPort
	if hasReady && endpoint {
		return nil
	}
	node = node.DeepCopy()
	now := metav1.Now()
	if !hasReady {
		node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated by sluice nodesim", LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	if s.kubeletPort != 0 {
		node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = s.kubeletPort
	}
	_, err := s.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
