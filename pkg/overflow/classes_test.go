// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
