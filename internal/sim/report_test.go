// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// full is a report of a run that showed the whole story.
func full() *Report {
	return &Report{
		FGD: []FGDResult{{Policy: "sluice", Capacity: 16, Pods: 3, Points: []FGDPoint{{Arrival: 0.5, UnallocatedPct: 50, AllocatedGPUs: 8}}}},
		Gangs: map[string][]GangResult{"tiresias": {{Policy: "sluice", Gangs: []GangOutcome{
			{Name: "a", Pods: 2, GPUsPerPod: 8, Placed: true, Leaves: 1, LowerBound: 1, Nodes: 2, LowerBoundNodes: 2, Waited: 3 * time.Second},
			{Name: "b", Pods: 4, GPUsPerPod: 8, Placed: true, Leaves: 2, LowerBound: 1, Nodes: 4, LowerBoundNodes: 4},
		}}}},
		Packing: []PackingResult{{Policy: "sluice", Pods: 4, Placed: 4, FreeNodes: 1, FreeLeaves: 1, Nodes: 2, Leaves: 2}},
		Scenario: []ScenarioResult{{Name: "smoke", Evictions: map[string]int{"preemption": 16, "return": 16}, GangRunning: map[string]time.Duration{"train": time.Second},
			GangLeaves: map[string]int{"train": 1}, GangLowerBound: map[string]int{"train": 1}}},
	}
}

// TestCheck: a smoke run passes only when it shows the whole story.
func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Report)
		want   string // "" for a report that passes
	}{
		{"the whole story", func(*Report) {}, ""},
		{"an FGD policy measured nothing", func(r *Report) { r.FGD[0].Points = nil }, "fgd, sluice: no measurement points"},
		{"a gang never placed", func(r *Report) { r.Gangs["tiresias"][0].Gangs[1].Placed = false }, "tiresias, sluice: 1 of 2 gangs placed"},
		{"a service not placed", func(r *Report) { r.Packing[0].Placed = 3 }, "dlrm, sluice: 3 of 4 pods placed"},
		{"nothing moved", func(r *Report) { r.Scenario[0].Evictions = map[string]int{} }, "scenario smoke: no production pod moved"},
		{"not all came back", func(r *Report) { r.Scenario[0].Evictions["return"] = 15 }, "scenario smoke: 16 pods moved to the overflow node, 15 came back"},
		{"the gang never ran", func(r *Report) { r.Scenario[0].GangRunning = nil }, "scenario smoke: no gang ran"},
		{"the gang spread", func(r *Report) { r.Scenario[0].GangLeaves["train"] = 2 }, "scenario smoke: gang train spans 2 leaves, its lower bound is 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := full()
			tt.change(r)
			err := r.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSummary: a gang run's summary in numbers (2 gangs placed, one at its
// leaf bound, one a leaf over it; mean wait (3s+0s)/2).
func TestSummary(t *testing.T) {
	s := full().Gangs["tiresias"][0].Summary()
	want := GangSummary{Gangs: 2, Placed: 2, AtLowerBound: 1, AtNodeBound: 2, MeanExtraLeaves: 0.5, MeanExtraNodes: 0, MeanWait: 1500 * time.Millisecond}
	if s != want {
		t.Errorf("Summary() = %+v, want %+v", s, want)
	}
}

// TestBySize: single-pod gangs are summed up apart from multi-pod ones,
// and multi-pod gangs by their GPUs.
func TestBySize(t *testing.T) {
	r := full().Gangs["tiresias"][0]
	r.Gangs = append(r.Gangs,
		GangOutcome{Name: "single", Pods: 1, GPUsPerPod: 8, Placed: true, Leaves: 1, LowerBound: 1, Nodes: 1, LowerBoundNodes: 1},
		GangOutcome{Name: "huge", Pods: 32, GPUsPerPod: 8})
	got := r.BySize()
	want := []SizeSummary{
		{Size: "1 pod", GangSummary: GangSummary{Gangs: 1, Placed: 1, AtLowerBound: 1, AtNodeBound: 1}},
		{Size: "9-32 GPUs", GangSummary: GangSummary{Gangs: 2, Placed: 2, AtLowerBound: 1, AtNodeBound: 2, MeanExtraLeaves: 0.5, MeanWait: 1500 * time.Millisecond}},
		{Size: "over 128 GPUs", GangSummary: GangSummary{Gangs: 1}},
	}
	if len(got) != len(want) {
		t.Fatalf("BySize() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("BySize()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestWrite: the report writes its summary, CSV and charts, and the
// summary carries the scenario's figures.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	summary, err := full().Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"evictions to overflow: 16, back to physical: 16", "gang train running 1s after it was submitted, on 1 leaves (lower bound 1)",
		"This is not the FGD paper's fragmentation metric", "| sluice | 9-32 GPUs | 2 | 2 | 1 (50%) |", "GPUs busy"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("summary lacks %q:\n%s", want, data)
		}
	}
	// The paper's figures measure something else: never printed beside ours.
	for _, paper := range []string{"Published", "4.77", "13.70"} {
		if strings.Contains(string(data), paper) {
			t.Errorf("summary prints the FGD paper's figures (%q) beside a different metric:\n%s", paper, data)
		}
	}
	for _, f := range []string{"scenario-smoke.csv", "scenario-smoke.svg", "packing.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestQueueJobs: the high-occupancy workload is the same for a seed, half
// single-GPU gangs, a mean near 21 GPUs, 8-GPU pods above 8 GPUs, and the
// constraint of the lowest level that holds each gang.
func TestQueueJobs(t *testing.T) {
	key := func(gpus int) string {
		if gpus <= 64 {
			return "leaf"
		}
		return "spine"
	}
	jobs := QueueJobs(3000, 1, 20*time.Second, 20*time.Minute, key)
	again := QueueJobs(3000, 1, 20*time.Second, 20*time.Minute, key)
	if jobs[2999] != again[2999] {
		t.Errorf("two runs with seed 1 differ: %+v, %+v", jobs[2999], again[2999])
	}
	gpus, single := 0, 0
	for i, j := range jobs {
		g := j.Pods * j.GPUsPerPod
		gpus += g
		if j.Pods == 1 {
			single++
		}
		if g > 8 && j.GPUsPerPod != 8 || g <= 8 && j.Pods != 1 {
			t.Fatalf("job %d: %d pods of %d GPUs", i, j.Pods, j.GPUsPerPod)
		}
		if want := key(g); j.TopologyKey != want {
			t.Fatalf("job %d (%d GPUs): key %q, want %q", i, g, j.TopologyKey, want)
		}
		if i > 0 && j.Submit < jobs[i-1].Submit {
			t.Fatalf("job %d arrives before job %d", i, i-1)
		}
	}
	if mean := float64(gpus) / float64(len(jobs)); mean < 18 || mean > 24 {
		t.Errorf("mean gang size %.1f GPUs, want about 21", mean)
	}
	if share := float64(single) / float64(len(jobs)); share < 0.65 || share > 0.78 {
		t.Errorf("%.2f of gangs are single pods, want about 0.71 (up to 8 GPUs)", share)
	}
}
