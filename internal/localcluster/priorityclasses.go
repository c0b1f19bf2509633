// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PriorityClasses are sluice's workload classes as manifests/priorityclasses.yaml
// ships them (a test keeps the two equal).
func PriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:       metav1.ObjectMeta{Name: "research"},
			Value:            100000,
			PreemptionPolicy: ptr.To(v1.PreemptLowerPriority),
			Description:      "Research training (gangs, Slurm workers). May claim every physical GPU; production overflows to external capacity.",
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
