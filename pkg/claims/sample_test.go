// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/metrics"
)

// TestSample: claims in progress by phase (given-up ones not counted), the
// victims they still have to move, and the longest stall of a claim still
// evicting (a freed claim waits for its pods, not for progress).
func TestSample(t *testing.T) {
	now := time.Now()
	claim := func(name string, phase v1alpha1.Phase, victims, replaced int, progress time.Duration) *v1alpha1.ResearchClaim {
		c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		c.Status.Phase = phase
		c.Status.ProgressTime = metav1.NewTime(now.Add(-progress))
		for i := range victims {
			uid := types.UID(fmt.Sprintf("%s-%d", name, i))
			c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{UID: uid})
			if i < replaced {
				c.Status.Replaced = append(c.Status.Replaced, uid)
			}
		}
		return c
	}
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.ResearchClaim{}, 0, cache.Indexers{})
	for _, c := range []*v1alpha1.ResearchClaim{
		claim("a", v1alpha1.PhaseEvicting, 10, 4, 90*time.Second),
		claim("b", v1alpha1.PhasePaused, 3, 0, 200*time.Second),
		claim("c", v1alpha1.PhaseFreed, 5, 5, 30*time.Minute),
		claim("d", v1alpha1.PhaseGivenUp, 7, 0, time.Hour),
	} {
		if err := inf.GetStore().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	s := &Store{}
	s.informer.Store(&inf)
	got := map[string]float64{}
	s.Sample(5 * time.Minute)(func(g *metrics.Gauge, value float64, labels ...string) {
		switch g {
		case metrics.ClaimActive:
			got["active "+labels[0]] = value
		case metrics.ClaimVictimsRemaining:
			got["remaining"] = value
		case metrics.ClaimStalled:
			got["stalled"] = value
		case metrics.ClaimWaveTimeout:
			got["timeout"] = value
		}
	})
	for key, want := range map[string]float64{"active Evicting": 1, "active Paused": 1, "active Freed": 1, "remaining": 9, "timeout": 300} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	if s := got["stalled"]; s < 200 || s > 260 {
		t.Errorf("stalled = %v s, want the paused claim's 200 s (the freed claim's 30 min does not count)", s)
	}
}
