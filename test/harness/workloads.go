// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// InferenceDeployment is a production inference Deployment as users write
// it: scheduled by sluice-production, PriorityClass production, tolerating
// the overflow taint, gpus GPUs per replica.
func InferenceDeployment(ns, name string, replicas int32, gpus int) *appsv1.Deployment {
	pod := Pod(ns, "").Scheduler("sluice-production").PriorityClass("production").TolerateOverflow().GPUs(gpus).Label("app", name).Obj()
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: pod.Spec},
		},
	}
}

// PDB is a PodDisruptionBudget with maxUnavailable (an int or a percent
// string) over app=name.
func PDB(ns, name string, maxUnavailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}
}

// CreateDeployment creates a Deployment and, if pdb is not nil, its PDB.
func CreateDeployment(t testing.TB, cp *ControlPlane, d *appsv1.Deployment, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Deployment %s: %v", d.Name, err)
	}
	if pdb != nil {
		if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating PDB %s: %v", pdb.Name, err)
		}
	}
}
