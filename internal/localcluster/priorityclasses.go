// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflow"
)

// PriorityClasses are sluice's workload classes as manifests/priorityclasses.yaml
// ships them (a test keeps the two equal).
func PriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:       metav1.ObjectMeta{Name: "research"},
			Value:            100000,
			PreemptionPolicy: ptr.To(v1.PreemptNever),
			Description:      "Research training (gangs, Slurm workers). Claims physical GPUs through sluice, which moves production to external capacity; never preempts through another scheduler.",
		},
		{
			ObjectMeta:       metav1.ObjectMeta{Name: "production"},
			Value:            10000,
			PreemptionPolicy: ptr.To(v1.PreemptNever),
			Description:      "Production inference. Never preempts; overflows to the virtual-kubelet node when research needs the GPUs.",
		},
	}
}

// CreatePriorityClasses creates the classes that do not exist yet.
func CreatePriorityClasses(ctx context.Context, client kubernetes.Interface) error {
	for _, pc := range PriorityClasses() {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}

// TenantLabels put a namespace in both classes' namespaces of the shipped
// tenancy policy: its pods may be research and production.
func TenantLabels() map[string]string {
	return map[string]string{overflow.ResearchNamespaceLabel: "true", overflow.ProductionNamespaceLabel: "true"}
}

// TenantNamespace creates the namespace, or labels it if it exists, with
// TenantLabels.
func TenantNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: TenantLabels()}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": TenantLabels()}})
		_, err = client.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("namespace %s for research and production: %w", name, err)
	}
	return nil
}
