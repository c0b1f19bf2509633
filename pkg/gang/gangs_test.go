// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

// TestRequestFromPodTemplates: a PodGroup created by JobSet, Kubeflow
// Trainer, LeaderWorkerSet or Kueue carries no fabric annotation; its pods
// do (their template's). The gang's request is read from them; the
// PodGroup's own annotations win; pods that disagree are an invalid
// request naming both.
func TestRequestFromPodTemplates(t *testing.T) {
	fabric := &config.FabricConfig{Levels: []config.FabricLevel{{Name: "leaf", NodeLabel: "example.com/leaf"}, {Name: "spine", NodeLabel: "example.com/spine"}},
		DefaultLevel: "any", DefaultMode: config.FabricModePreferred}
	tests := []struct {
		name     string
		podGroup map[string]string
		pods     []map[string]string
		want     FabricRequest
		err      string
	}{
		{"from the pods (Kueue TAS)", nil, []map[string]string{{KueueRequiredTopologyAnnotation: "example.com/spine"}, {KueueRequiredTopologyAnnotation: "example.com/spine"}},
			FabricRequest{Level: "spine", Mode: config.FabricModeRequired}, ""},
		{"from the pods (sluice's)", nil, []map[string]string{{FabricLevelAnnotation: "Leaf", FabricModeAnnotation: "Required"}, {FabricLevelAnnotation: "Leaf", FabricModeAnnotation: "Required"}},
			FabricRequest{Level: "leaf", Mode: config.FabricModeRequired}, ""},
		{"the PodGroup's win", map[string]string{FabricLevelAnnotation: "spine"}, []map[string]string{{FabricLevelAnnotation: "leaf"}},
			FabricRequest{Level: "spine", Mode: config.FabricModePreferred}, ""},
		{"a bare template beside an annotated one", nil, []map[string]string{nil, {FabricLevelAnnotation: "leaf"}},
			FabricRequest{Level: "leaf", Mode: config.FabricModePreferred}, ""},
		{"none anywhere: defaults", nil, []map[string]string{{"other": "x"}}, FabricRequest{Level: "any", Mode: config.FabricModePreferred}, ""},
		{"pods disagree", nil, []map[string]string{{FabricLevelAnnotation: "leaf"}, {FabricLevelAnnotation: "spine"}}, FabricRequest{},
			"pods w0 and w1 ask for different fabric placements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", Annotations: tt.podGroup}}
			pgs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if err := pgs.Add(pg); err != nil {
				t.Fatal(err)
			}
			podInformer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
			members, err := NewMemberIndex(podInformer)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range tt.pods {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w" + string(rune('0'+i)), Annotations: a},
					Spec: v1.PodSpec{SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}}}
				if err := podInformer.GetIndexer().Add(pod); err != nil {
					t.Fatal(err)
				}
			}
			g, err := NewGangs(nil, schedulinglisters.NewPodGroupLister(pgs), members, fabric).Get(Key{API: Native, Namespace: "ns", Name: "train"})
			if tt.err != "" {
				var invalid *InvalidError
				if !errors.As(err, &invalid) || invalid.Reason != ReasonInvalidRequest || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want an invalid request containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Request != tt.want {
				t.Errorf("request %+v, want %+v", g.Request, tt.want)
			}
		})
	}
}
