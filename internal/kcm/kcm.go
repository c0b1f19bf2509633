// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package kcm runs kube-controller-manager controllers in this process,
// against any apiserver. Tests, the simulator and the demo use it where
// evicted pods must be replaced, PodDisruptionBudgets enforced, and deleted
// namespaces and owners cleaned up for real.
package kcm

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/endpointslice"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/nodelifecycle"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	hpametrics "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/scheduling/podgroupprotection"
	"k8s.io/kubernetes/pkg/controller/statefulset"
	"k8s.io/kubernetes/pkg/controller/tainteviction"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// Set chooses the controllers to run.
type Set struct {
	// Workloads runs the ReplicaSet, Deployment, StatefulSet and
	// disruption controllers: evicted pods get replaced and PDB status is
	// kept current.
	Workloads bool
	// Cleanup runs the namespace and garbage-collector controllers: a
	// deleted namespace is emptied and removed, and objects whose owner is
	// gone are deleted, as in a real cluster.
	Cleanup bool
	// Network runs the EndpointSlice controller: Services' EndpointSlices
	// list the addresses of the pods they select, ready when the pods are.
	Network bool
	// RoleAggregation runs the ClusterRole aggregation controller: the
	// aggregated roles (admin, edit, view) take in the rules of the
	// ClusterRoles labelled for them, as a tenant's roles do in a real
	// cluster.
	RoleAggregation bool
	// NodeLifecycle runs the node lifecycle and taint eviction controllers
	// with kube-controller-manager's defaults: a node whose Lease is not
	// renewed for 50 s turns Unknown, its pods not Ready, and it is tainted
	// node.kubernetes.io/unreachable:NoExecute; the taint eviction
	// controller deletes its pods once their toleration of the taint
	// (300 s by default, from the DefaultTolerationSeconds admission
	// plugin) ends. Only for a control plane whose nodes all renew their
	// Leases (the node simulator's do not).
	NodeLifecycle bool
	// Autoscaling runs the horizontal pod autoscaler controller with
	// kube-controller-manager's defaults (15 s sync, 10% tolerance, 5 min
	// CPU initialization and downscale stabilization), reading resource
	// metrics from metrics.k8s.io as it does (a metrics-server behind the
	// apiserver's aggregator).
	Autoscaling bool
}

// kube-controller-manager's defaults for the node lifecycle controller.
const (
	nodeMonitorPeriod         = 5 * time.Second
	nodeStartupGracePeriod    = 60 * time.Second
	NodeMonitorGracePeriod    = 50 * time.Second
	nodeEvictionRate          = 0.1
	secondaryNodeEvictionRate = 0.01
	largeClusterSizeThreshold = 50
	unhealthyZoneThreshold    = 0.55
)

// kube-controller-manager's defaults for the HPA controller.
const (
	hpaSyncPeriod               = 15 * time.Second
	hpaDownscaleStabilization   = 5 * time.Minute
	hpaTolerance                = 0.1
	hpaCPUInitializationPeriod  = 5 * time.Minute
	hpaInitialReadinessDelay    = 30 * time.Second
	hpaConcurrentAutoscalerSync = 5
)

// discoverySyncPeriod is how often the garbage collector and the REST
// mapper re-read discovery (CRDs installed later become collectable).
const discoverySyncPeriod = 10 * time.Second

// Running is the controllers Start started.
type Running struct {
	mu sync.Mutex
	// disruption runs the disruption controller until its context ends
	// (nil without Workloads); stopDisruption ends it.
	disruption     func(ctx context.Context) func()
	stopDisruption context.CancelFunc
	ctx            context.Context
}

// StopDisruption stops the disruption controller, as when
// kube-controller-manager is down: PodDisruptionBudget status is no
// longer kept current (the Eviction API then refuses with 429 once a
// budget's status is spent or out of date). The returned function starts
// a fresh one.
func (r *Running) StopDisruption() (restart func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopDisruption == nil {
		return func() {}
	}
	r.stopDisruption()
	r.stopDisruption = nil
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopDisruption == nil && r.ctx.Err() == nil {
			r.startDisruption()
		}
	}
}

func (r *Running) startDisruption() {
	ctx, cancel := context.WithCancel(r.ctx)
	r.stopDisruption = cancel
	go r.disruption(ctx)()
}

// Start runs the chosen controllers until ctx ends. It returns once their
// informers have synced.
func Start(ctx context.Context, cfg *rest.Config, set Set) (*Running, error) {
	client := func(agent string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), agent))
	}
	informerClient, err := client("kcm-informers")
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(informerClient, 12*time.Hour)
	running := &Running{ctx: ctx}
	var run []func()
	if set.Workloads {
		fns, disruption, err := workloads(ctx, cfg, client, factory)
		if err != nil {
			return nil, err
		}
		run = append(run, fns...)
		running.disruption = disruption
	}
	if set.Network {
		c, err := client("endpointslice-controller")
		if err != nil {
			return nil, err
		}
		esc := endpointslice.NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().Services(),
			factory.Core().V1().Nodes(), factory.Discovery().V1().EndpointSlices(), 100, c, 0)
		run = append(run, func() { esc.Run(ctx, 2) })
	}
	if set.RoleAggregation {
		c, err := client("clusterrole-aggregation-controller")
		if err != nil {
			return nil, err
		}
		agg := clusterroleaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), c.RbacV1())
		run = append(run, func() { agg.Run(ctx, 1) })
	}
	if set.NodeLifecycle {
		// Both use node-controller's identity, as in kube-controller-manager.
		c, err := client("node-controller")
		if err != nil {
			return nil, err
		}
		nlc, err := nodelifecycle.NewNodeLifecycleController(ctx, factory.Coordination().V1().Leases(),
			factory.Core().V1().Pods(), factory.Core().V1().Nodes(), factory.Apps().V1().DaemonSets(), c,
			nodeMonitorPeriod, nodeStartupGracePeriod, NodeMonitorGracePeriod,
			nodeEvictionRate, secondaryNodeEvictionRate, largeClusterSizeThreshold, unhealthyZoneThreshold)
		if err != nil {
			return nil, fmt.Errorf("node lifecycle controller: %w", err)
		}
		tec, err := tainteviction.New(ctx, c, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), "taint-eviction-controller")
		if err != nil {
			return nil, fmt.Errorf("taint eviction controller: %w", err)
		}
		run = append(run, func() { nlc.Run(ctx) }, func() { tec.Run(ctx) })
	}
	if set.Autoscaling {
		fns, err := autoscaling(ctx, cfg, client, factory)
		if err != nil {
			return nil, err
		}
		run = append(run, fns...)
	}
	var metadataInformers metadatainformer.SharedInformerFactory
	if set.Cleanup {
		fns, mi, err := cleanup(ctx, cfg, client, factory)
		if err != nil {
			return nil, err
		}
		metadataInformers = mi
		run = append(run, fns...)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("controller informer for %v did not sync", typ)
		}
	}
	if metadataInformers != nil {
		metadataInformers.Start(ctx.Done())
	}
	for _, f := range run {
		go f()
	}
	if running.disruption != nil {
		running.mu.Lock()
		running.startDisruption()
		running.mu.Unlock()
	}
	return running, nil
}

// autoscaling builds the HPA controller as kube-controller-manager does.
func autoscaling(ctx context.Context, cfg *rest.Config, client func(string) (kubernetes.Interface, error), factory informers.SharedInformerFactory) ([]func(), error) {
	hpaClient, err := client("horizontal-pod-autoscaler")
	if err != nil {
		return nil, err
	}
	hpaConfig := rest.AddUserAgent(rest.CopyConfig(cfg), "horizontal-pod-autoscaler")
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(hpaClient.Discovery()))
	scaleClient, err := scale.NewForConfig(hpaConfig, mapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(hpaClient.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("HPA scale client: %w", err)
	}
	apiVersions := custom_metrics.NewAvailableAPIsGetter(hpaClient.Discovery())
	resources, err := resourceclient.NewForConfig(hpaConfig)
	if err != nil {
		return nil, fmt.Errorf("HPA resource metrics client: %w", err)
	}
	external, err := external_metrics.NewForConfig(hpaConfig)
	if err != nil {
		return nil, fmt.Errorf("HPA external metrics client: %w", err)
	}
	metricsClient := hpametrics.NewRESTMetricsClient(resources, custom_metrics.NewForConfig(hpaConfig, mapper, apiVersions), external)
	hpa := podautoscaler.NewHorizontalController(ctx, hpaClient.CoreV1(), scaleClient, hpaClient.AutoscalingV2(), mapper, metricsClient,
		factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(),
		hpaSyncPeriod, hpaDownscaleStabilization, hpaTolerance, hpaCPUInitializationPeriod, hpaInitialReadinessDelay)
	return []func(){
		func() { custom_metrics.PeriodicallyInvalidate(apiVersions, hpaSyncPeriod, ctx.Done()) },
		func() { hpa.Run(ctx, hpaConcurrentAutoscalerSync) },
	}, nil
}

// workloads builds the workload controllers, and a function that builds
// a disruption controller and returns its run (a stopped one cannot run
// again: its queue is shut down); it is called under Running.mu.
func workloads(ctx context.Context, cfg *rest.Config, client func(string) (kubernetes.Interface, error), factory informers.SharedInformerFactory) ([]func(), func(context.Context) func(), error) {
	rsClient, err := client("replicaset-controller")
	if err != nil {
		return nil, nil, err
	}
	rsc := replicaset.NewReplicaSetController(ctx,
		factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), rsClient, replicaset.BurstReplicas)

	dClient, err := client("deployment-controller")
	if err != nil {
		return nil, nil, err
	}
	dc, err := deployment.NewDeploymentController(ctx,
		factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), dClient)
	if err != nil {
		return nil, nil, fmt.Errorf("deployment controller: %w", err)
	}

	ssClient, err := client("statefulset-controller")
	if err != nil {
		return nil, nil, err
	}
	ssc := statefulset.NewStatefulSetController(ctx,
		factory.Core().V1().Pods(), factory.Apps().V1().StatefulSets(), factory.Core().V1().PersistentVolumeClaims(),
		factory.Apps().V1().ControllerRevisions(), ssClient)

	pdbClient, err := client("disruption-controller")
	if err != nil {
		return nil, nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(pdbClient.Discovery()))
	scaleClient, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(pdbClient.Discovery()))
	if err != nil {
		return nil, nil, fmt.Errorf("scale client: %w", err)
	}
	newDisruption := func(ctx context.Context, factory informers.SharedInformerFactory) *disruption.DisruptionController {
		return disruption.NewDisruptionController(ctx,
			factory.Core().V1().Pods(),
			factory.Policy().V1().PodDisruptionBudgets(),
			factory.Core().V1().ReplicationControllers(),
			factory.Apps().V1().ReplicaSets(),
			factory.Apps().V1().Deployments(),
			factory.Apps().V1().StatefulSets(),
			pdbClient, mapper, scaleClient, pdbClient.Discovery())
	}
	// The first one is built now, so its informers start with the others.
	first := newDisruption(ctx, factory)
	var built bool
	disruptionRun := func(ctx context.Context) func() {
		if !built {
			built = true
			return func() { first.Run(ctx, 2) }
		}
		// A restart is built on informers of its own, started after it
		// is built and stopped with it. The controller adds its pod
		// handler before it sets its PDB lister, so on informers already
		// running the handler, replaying the existing pods at once, can
		// run first and dereference the nil lister: it did, a panic in
		// getPdbForPod at the soak's second restart.
		own := informers.NewSharedInformerFactory(pdbClient, 12*time.Hour)
		dc := newDisruption(ctx, own)
		return func() {
			own.Start(ctx.Done())
			own.WaitForCacheSync(ctx.Done())
			dc.Run(ctx, 2)
		}
	}
	return []func(){
		func() { rsc.Run(ctx, 5) },
		func() { dc.Run(ctx, 5) },
		func() { ssc.Run(ctx, 2) },
	}, disruptionRun, nil
}

func cleanup(ctx context.Context, cfg *rest.Config, client func(string) (kubernetes.Interface, error), factory informers.SharedInformerFactory) ([]func(), metadatainformer.SharedInformerFactory, error) {
	nsClient, err := client("namespace-controller")
	if err != nil {
		return nil, nil, err
	}
	nsMetadata, err := metadata.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "namespace-controller"))
	if err != nil {
		return nil, nil, err
	}
	nsc := namespace.NewNamespaceController(ctx, nsClient, nsMetadata,
		nsClient.Discovery().ServerPreferredNamespacedResources,
		factory.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)

	gcClient, err := client("generic-garbage-collector")
	if err != nil {
		return nil, nil, err
	}
	gcMetadata, err := metadata.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "generic-garbage-collector"))
	if err != nil {
		return nil, nil, err
	}
	discovery := memory.NewMemCacheClient(gcClient.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(discovery)
	mapper.Reset()
	metadataInformers := metadatainformer.NewSharedInformerFactory(gcMetadata, 0)
	started := make(chan struct{})
	close(started) // the shared factories start before the collector runs
	gc, err := garbagecollector.NewGarbageCollector(ctx, gcClient, gcMetadata, mapper,
		garbagecollector.DefaultIgnoredResources(),
		informerfactory.NewInformerFactory(factory, metadataInformers), started)
	if err != nil {
		return nil, nil, fmt.Errorf("garbage collector: %w", err)
	}
	run := []func(){
		func() { nsc.Run(ctx, 5) },
		func() { wait.Until(mapper.Reset, discoverySyncPeriod, ctx.Done()) },
		func() { gc.Run(ctx, 5, discoverySyncPeriod) },
		func() { gc.Sync(ctx, gcClient.Discovery(), discoverySyncPeriod) },
	}
	// Native PodGroups carry a protection finalizer that only this
	// controller removes; without it their namespaces never go away.
	if servesNativePodGroups(gcClient) {
		pgClient, err := client("podgroup-protection-controller")
		if err != nil {
			return nil, nil, err
		}
		pgc, err := podgroupprotection.NewPodGroupProtectionController(klog.FromContext(ctx),
			factory.Scheduling().V1beta1().PodGroups(), factory.Core().V1().Pods(), pgClient)
		if err != nil {
			return nil, nil, fmt.Errorf("podgroup protection controller: %w", err)
		}
		run = append(run, func() { pgc.Run(ctx, 2) })
	}
	return run, metadataInformers, nil
}

// servesNativePodGroups reports whether the apiserver serves
// scheduling.k8s.io/v1beta1 PodGroups.
func servesNativePodGroups(client kubernetes.Interface) bool {
	list, err := client.Discovery().ServerResourcesForGroupVersion(schedulingv1beta1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "podgroups" {
			return true
		}
	}
	return false
}
