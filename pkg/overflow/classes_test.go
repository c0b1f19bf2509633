// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

// TestOptOutIsCaseInsensitive: sluice.dev/overflow: never opts a
// production pod out of overflow however it is spelled.
func TestOptOutIsCaseInsensitive(t *testing.T) {
	classes, err := NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"", "never", "Never", "NEVER", " never "} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "serve"}}
		if value != "" {
			p.Annotations = map[string]string{Annotation: value}
		}
		p.Spec.PriorityClassName = "production"
		p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
		if got, want := classes.Eligible(p), value == ""; got != want {
			t.Errorf("%s: %q: eligible %v, want %v", Annotation, value, got, want)
		}
	}
}

// TestTenancyPolicy: a pod of a class outside its class's namespaces is
// neither research nor production, and Refused names the setting; a
// namespace not known (yet) is in no selected namespaces.
func TestTenancyPolicy(t *testing.T) {
	cfg := &config.OverflowConfig{ResearchPriorityClasses: []string{"research"}, ProductionPriorityClasses: []string{"production"},
		OverflowNodeSelector: "type=virtual-kubelet", OverflowTaintKey: "virtual-kubelet.io/provider",
		ResearchNamespaces:   &metav1.LabelSelector{MatchLabels: map[string]string{ResearchNamespaceLabel: "true"}},
		ProductionNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{ProductionNamespaceLabel: "true"}}}
	namespaces := map[string]labels.Set{"lab": {ResearchNamespaceLabel: "true"}, "serving": {ProductionNamespaceLabel: "true"}, "tenant": {}}
	classes, err := ClassesFrom(cfg, func(name string) (labels.Set, bool) { l, ok := namespaces[name]; return l, ok })
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, class string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: v1.PodSpec{PriorityClassName: class}}
	}
	for _, tc := range []struct {
		ns, class          string
		research, producer bool
		refused            string
	}{
		{"lab", "research", true, false, ""},
		{"serving", "production", false, true, ""},
		{"tenant", "research", false, false, ResearchNamespacesSetting},
		{"tenant", "production", false, false, ProductionNamespacesSetting},
		{"serving", "research", false, false, ResearchNamespacesSetting},
		{"not-yet-known", "research", false, false, ResearchNamespacesSetting},
		{"tenant", "batch", false, false, ""},
	} {
		p := pod(tc.ns, tc.class)
		if got := classes.IsResearch(p); got != tc.research {
			t.Errorf("%s in %s: research %v, want %v", tc.class, tc.ns, got, tc.research)
		}
		if got := classes.IsProduction(p); got != tc.producer {
			t.Errorf("%s in %s: production %v, want %v", tc.class, tc.ns, got, tc.producer)
		}
		if got := classes.Refused(p); got != tc.refused {
			t.Errorf("%s in %s: refused by %q, want %q", tc.class, tc.ns, got, tc.refused)
		}
	}
}
