// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package disruption

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

// TestBudgetsOf: which production pods may move, and what paces them.
func TestBudgetsOf(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	add := func(obj any) {
		t.Helper()
		var err error
		switch o := obj.(type) {
		case *appsv1.ReplicaSet:
			err = inf.Apps().V1().ReplicaSets().Informer().GetStore().Add(o)
		case *appsv1.StatefulSet:
			err = inf.Apps().V1().StatefulSets().Informer().GetStore().Add(o)
		case *policyv1.PodDisruptionBudget:
			err = inf.Policy().V1().PodDisruptionBudgets().Informer().GetStore().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := NewLedger(inf, intstr.FromString("25%"), fake.NewClientset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := func(name string, replicas int32) {
		add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, UID: types.UID("uid-" + name)}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}})
	}
	pdb := func(name, app string, spec policyv1.PodDisruptionBudgetSpec, status policyv1.PodDisruptionBudgetStatus) {
		spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		add(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Generation: 1}, Spec: spec, Status: status})
	}
	pod := func(app, kind, owner string) *v1.Pod {
		p := st.MakePod().Namespace("prod").Name(app + "-0").UID(app + "-0").Obj()
		p.Labels = map[string]string{"app": app}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: owner, UID: types.UID("uid-" + owner), Controller: ptr.To(true)}}
		}
		return p
	}
	rs("nopdb", 8)
	rs("small", 2)
	rs("protected", 4)
	rs("single", 1)
	rs("twice", 4)
	rs("paced", 10)
	add(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db", UID: "uid-db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}})
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	pdb("protected", "protected", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero}, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 4, DesiredHealthy: 4, CurrentHealthy: 4})
	pdb("single", "single", policyv1.PodDisruptionBudgetSpec{MinAvailable: &one}, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 1, DesiredHealthy: 1, CurrentHealthy: 1})
	pdb("twice-a", "twice", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one}, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 4, DesiredHealthy: 3, CurrentHealthy: 4, DisruptionsAllowed: 1})
	pdb("twice-b", "twice", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one}, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 4, DesiredHealthy: 3, CurrentHealthy: 4, DisruptionsAllowed: 1})
	two := intstr.FromInt32(2)
	pdb("paced", "paced", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &two}, policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 10, DesiredHealthy: 8, CurrentHealthy: 9, DisruptionsAllowed: 1})
	// Not yet seen by the disruption controller: computed from the spec.
	pdb("fresh", "fresh", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &two}, policyv1.PodDisruptionBudgetStatus{})
	rs("fresh", 6)
	// policy/v1: an empty selector selects every pod of its namespace, a
	// missing one none.
	add(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "all", Generation: 1},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{}},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 4, DesiredHealthy: 3, CurrentHealthy: 4, DisruptionsAllowed: 1}})
	add(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "none", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one}}) // no selector: selects nothing
	everyone := pod("everyone", "ReplicaSet", "everyone")
	everyone.Namespace = "other"
	add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "everyone", UID: "uid-everyone"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4)}})

	for _, tt := range []struct {
		name         string
		pod          *v1.Pod
		wantWhy      string
		wantName     string
		wantCapacity int
	}{
		{"no PDB: the default 25% of 8", pod("nopdb", "ReplicaSet", "nopdb"), "", "default/prod/ReplicaSet/nopdb", 2},
		{"no PDB, 2 replicas: at least 1", pod("small", "ReplicaSet", "small"), "", "default/prod/ReplicaSet/small", 1},
		{"a StatefulSet without PDB", pod("db", "StatefulSet", "db"), "", "default/prod/StatefulSet/db", 1},
		{"a PDB with slack", pod("paced", "ReplicaSet", "paced"), "", "pdb/prod/paced", 2},
		{"a PDB with an empty selector", everyone, "", "pdb/other/all", 1},
		{"a PDB not observed yet", pod("fresh", "ReplicaSet", "fresh"), "", "pdb/prod/fresh", 2},
		{"maxUnavailable 0", pod("protected", "ReplicaSet", "protected"), "allows no disruption (maxUnavailable 0)", "", 0},
		{"one replica, minAvailable 1", pod("single", "ReplicaSet", "single"), "allows no disruption (minAvailable 1", "", 0},
		{"two PDBs", pod("twice", "ReplicaSet", "twice"), "selected by 2 PodDisruptionBudgets (twice-a, twice-b)", "", 0},
		{"a bare pod", pod("bare", "", ""), "no controller", "", 0},
		{"a Job's pod", pod("job", "Job", "batch"), "whose replacements sluice does not follow", "", 0},
		{"an unknown ReplicaSet", pod("ghost", "ReplicaSet", "ghost"), "is not known yet", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, why := b.Of(tt.pod)
			if tt.wantWhy != "" {
				if !strings.Contains(why, tt.wantWhy) {
					t.Fatalf("why = %q, want it to contain %q", why, tt.wantWhy)
				}
				return
			}
			if why != "" {
				t.Fatalf("not movable: %s", why)
			}
			if got.Name != tt.wantName || got.Capacity != tt.wantCapacity {
				t.Errorf("budget %s capacity %d, want %s %d", got.Name, got.Capacity, tt.wantName, tt.wantCapacity)
			}
		})
	}
}
