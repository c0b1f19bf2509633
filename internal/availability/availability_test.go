// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package availability

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTracker: a Deployment of 3 loses two replicas for 2 s and one for
// 1 s during the claim: it served at least 1, for 2*2+1*1 = 5
// replica-seconds below spec; nothing is counted outside a phase, and a
// workload first seen during a phase starts from what serves.
func TestTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := New(func() time.Time { return now })
	tick := func(d time.Duration) { now = now.Add(d) }
	tr.Want("llm", 3)
	for _, p := range []string{"a", "b", "c"} {
		tr.Observe("llm", p, true)
	}
	tick(10 * time.Second)
	tr.Observe("llm", "a", false) // outside any phase
	tick(10 * time.Second)
	tr.Observe("llm", "a", true)
	if got := tr.Phase("claim"); got != nil {
		t.Fatalf("claim figures before the claim: %v", got)
	}
	tr.SetPhase("claim")
	tick(time.Second)
	tr.Observe("llm", "a", false)
	tr.Observe("llm", "b", false)
	tick(2 * time.Second)
	tr.Observe("llm", "a2", true)
	tick(time.Second)
	tr.Observe("llm", "b2", true)
	tr.Want("web", 2) // tracked mid-phase, none serving
	tick(3 * time.Second)
	tr.SetPhase("")
	tick(time.Hour)
	got := tr.Phase("claim")
	want := map[string]Figures{
		"llm": {Replicas: 3, MinReady: 1, BelowSeconds: 5},
		"web": {Replicas: 2, MinReady: 0, BelowSeconds: 6},
	}
	for w, f := range want {
		if got[w] != f {
			t.Errorf("%s during the claim: %+v, want %+v", w, got[w], f)
		}
	}
	if r, w := tr.Ready("llm"); r != 3 || w != 3 {
		t.Errorf("llm: %d of %d serving, want 3 of 3", r, w)
	}
	if tr.AllReady() {
		t.Error("AllReady with web serving none of 2")
	}
}

func TestServing(t *testing.T) {
	ready := &v1.Pod{Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}}
	deleting := ready.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{{"ready", ready, true}, {"deleting", deleting, false}, {"pending", &v1.Pod{}, false}} {
		if got := Serving(c.pod); got != c.want {
			t.Errorf("%s: Serving = %v, want %v", c.name, got, c.want)
		}
	}
}
