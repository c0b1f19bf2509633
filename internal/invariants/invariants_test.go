// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package invariants

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// cluster is a fake apiserver with a ReplicaSet serve of 8 Ready
// production pods (app=serve).
type cluster struct {
	t  *testing.T
	cs *fake.Clientset
}

func newCluster(t *testing.T, pdbs ...*policyv1.PodDisruptionBudget) (*cluster, *Watcher) {
	c := &cluster{t: t, cs: fake.NewClientset()}
	ctx := t.Context()
	if _, err := c.cs.AppsV1().ReplicaSets("prod").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve", UID: "rs-serve"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](8)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: fmt.Sprintf("serve-%d", i), UID: types.UID(fmt.Sprintf("serve-%d", i)),
			Labels:          map[string]string{"app": "serve"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "serve", UID: "rs-serve", Controller: ptr.To(true)}}}}
		p.Spec.PriorityClassName = "production"
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		if _, err := c.cs.CoreV1().Pods("prod").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pdb := range pdbs {
		if _, err := c.cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Start(ctx, c.cs, Options{Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	w.Arm()
	return c, w
}

// evict marks pods as the Eviction API does before it deletes them.
func (c *cluster) evict(names ...string) {
	c.t.Helper()
	for _, name := range names {
		p, err := c.cs.CoreV1().Pods("prod").Get(c.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
		if _, err := c.cs.CoreV1().Pods("prod").UpdateStatus(c.t.Context(), p, metav1.UpdateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// seen waits until the watcher has seen n production evictions.
func seen(t *testing.T, w *Watcher, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return w.Evictions()["production"] >= n, nil
	}); err != nil {
		t.Fatalf("the watcher saw %d of %d evictions", w.Evictions()["production"], n)
	}
}

func pdb(name string, selector *metav1.LabelSelector, maxUnavailable int32) *policyv1.PodDisruptionBudget {
	mu := intstr.FromInt32(maxUnavailable)
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: selector}}
}

// TestBudgetOverdrafts: the watcher counts an eviction that leaves a
// budget short, and only that: a PDB over the pods' labels, a PDB with an
// empty selector (every pod of its namespace), and, with no PDB, sluice's
// default budget (25% of 8: 2 may be down).
func TestBudgetOverdrafts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		pdbs  []*policyv1.PodDisruptionBudget
		evict int
		want  int // overdrafts
		why   string
	}{
		{name: "default budget kept", evict: 2},
		{name: "default budget overdrawn", evict: 3, want: 1, why: "ReplicaSet prod/serve, which has no PodDisruptionBudget, with 5 healthy pods; its default budget requires 6 of 8"},
		{name: "PDB kept", pdbs: []*policyv1.PodDisruptionBudget{pdb("serve", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}}, 1)}, evict: 1},
		{name: "PDB overdrawn", pdbs: []*policyv1.PodDisruptionBudget{pdb("serve", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}}, 1)}, evict: 2, want: 1,
			why: "PodDisruptionBudget prod/serve with 6 healthy pods; it requires 7 of 8"},
		{name: "empty selector overdrawn", pdbs: []*policyv1.PodDisruptionBudget{pdb("all", &metav1.LabelSelector{}, 1)}, evict: 2, want: 1,
			why: "PodDisruptionBudget prod/all with 6 healthy pods"},
		{name: "no selector: the default budget applies", pdbs: []*policyv1.PodDisruptionBudget{pdb("none", nil, 0)}, evict: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, w := newCluster(t, tt.pdbs...)
			for i := range tt.evict {
				c.evict(fmt.Sprintf("serve-%d", i))
				seen(t, w, i+1)
			}
			if got := w.Overdrafts(); got != tt.want {
				t.Fatalf("%d overdrafts, want %d; violations %q", got, tt.want, w.Violations())
			}
			if tt.why != "" && (len(w.Violations()) == 0 || !strings.Contains(w.Violations()[0], tt.why)) {
				t.Errorf("violations %q, want one saying %q", w.Violations(), tt.why)
			}
		})
	}
}
