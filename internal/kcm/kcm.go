// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package kcm runs the kube-controller-manager controllers that overflow
// depends on (ReplicaSet, Deployment, disruption) in this process, against
// any apiserver. Tests and the demo use it where evicted pods must be
// replaced and PodDisruptionBudgets must be enforced for real.
package kcm

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// Start runs the ReplicaSet, Deployment and disruption controllers until ctx
// ends. It returns once their informers have synced.
func Start(ctx context.Context, cfg *rest.Config) error {
	client := func(agent string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), agent))
	}
	informerClient, err := client("kcm-informers")
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(informerClient, 12*time.Hour)

	rsClient, err := client("replicaset-controller")
	if err != nil {
		return err
	}
	rsc := replicaset.NewReplicaSetController(ctx,
		factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), rsClient, replicaset.BurstReplicas)

	dClient, err := client("deployment-controller")
	if err != nil {
		return err
	}
	dc, err := deployment.NewDeploymentController(ctx,
		factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), dClient)
	if err != nil {
		return fmt.Errorf("deployment controller: %w", err)
	}

	pdbClient, err := client("disruption-controller")
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(pdbClient.Discovery()))
	scaleClient, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(pdbClient.Discovery()))
	if err != nil {
		return fmt.Errorf("scale client: %w", err)
	}
	pdbc := disruption.NewDisruptionController(ctx,
		factory.Core().V1().Pods(),
		factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(),
		factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(),
		factory.Apps().V1().StatefulSets(),
		pdbClient, mapper, scaleClient, pdbClient.Discovery())

	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("controller informer for %v did not sync", typ)
		}
	}
	go rsc.Run(ctx, 5)
	go dc.Run(ctx, 5)
	go pdbc.Run(ctx, 2)
	return nil
}
