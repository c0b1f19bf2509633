// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// TestReused: a scrape within maxAge of the sample it would reuse gets
// that sample's values without running the sampler; an older one runs it
// again. Concurrent scrapes each get a whole sample.
func TestReused(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	runs := 0
	value := 1.0
	s := Reused(func(emit Emit) {
		runs++
		emit(CapacityGPUs, value, "physical", "free")
		emit(FabricLargestFreeGPUs, 2*value, "leaf")
	}, 10*time.Second, clk)
	type sample struct {
		name   string
		value  float64
		labels []string
	}
	names := map[*Gauge]string{CapacityGPUs: "capacity_gpus", FabricLargestFreeGPUs: "fabric_largest_free_gpus"}
	scrape := func() []sample {
		var got []sample
		s(func(g *Gauge, v float64, labelValues ...string) {
			got = append(got, sample{names[g], v, labelValues})
		})
		return got
	}
	want := func(v float64) []sample {
		return []sample{{"capacity_gpus", v, []string{"physical", "free"}}, {"fabric_largest_free_gpus", 2 * v, []string{"leaf"}}}
	}
	cmpOpts := cmp.AllowUnexported(sample{})
	if diff := cmp.Diff(want(1), scrape(), cmpOpts); diff != "" {
		t.Fatalf("first scrape (-want +got):\n%s", diff)
	}
	value = 5
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if diff := cmp.Diff(want(1), scrape(), cmpOpts); diff != "" || runs != 1 {
		t.Fatalf("scrape 9 s later ran the sampler %d times, want 1 (-want +got):\n%s", runs, diff)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if diff := cmp.Diff(want(5), scrape(), cmpOpts); diff != "" || runs != 2 {
		t.Fatalf("scrape 10 s after the sample ran the sampler %d times, want 2 (-want +got):\n%s", runs, diff)
	}

	// Concurrent scrapes, some running the sampler: each sees two values.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				clk.SetTime(clk.Now().Add(10 * time.Second))
			}
			n := 0
			s(func(*Gauge, float64, ...string) { n++ })
			if n != 2 {
				t.Errorf("a concurrent scrape got %d values, want 2", n)
			}
		}()
	}
	wg.Wait()
}
