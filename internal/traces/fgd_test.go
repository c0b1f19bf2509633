// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFGDSample(t *testing.T) {
	trace := []OpenbPod{
		{Name: "cpu-only", MilliCPU: 4000},
		{Name: "share-460", GPUs: 1, GPUMilli: 460},
		{Name: "one-gpu", GPUs: 1, GPUMilli: 1000},
		{Name: "eight-gpu", GPUs: 8, GPUMilli: 1000},
	}
	tests := []struct {
		name         string
		pods         []OpenbPod
		capacityGPUs int
		arrival      float64
		// wantTargetMilli is arrival x capacity in thousandths of a GPU;
		// 0 when the result must be nil.
		wantTargetMilli float64
	}{
		{"130% of 16 GPUs: stop at 20,800 milli", trace, 16, 1.3, 20800},
		{"100% of 1 GPU", trace, 1, 1, 1000},
		{"a tiny level still admits one pod", trace, 100, 1e-9, 1e-4},
		{"no capacity", trace, 0, 1.3, 0},
		{"zero arrival", trace, 16, 0, 0},
		{"negative arrival", trace, 16, -1, 0},
		{"NaN arrival", trace, 16, math.NaN(), 0},
		{"infinite arrival would never stop", trace, 16, math.Inf(1), 0},
		{"no GPU pods to draw", trace[:1], 16, 1.3, 0},
		{"no pods", nil, 16, 1.3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrived := FGDSample(tt.pods, tt.capacityGPUs, tt.arrival, 7)
			if tt.wantTargetMilli == 0 {
				if arrived != nil {
					t.Fatalf("got %d pods, want nil", len(arrived))
				}
				return
			}
			if len(arrived) == 0 {
				t.Fatal("got no pods")
			}
			// Every pod but the last leaves the load below the target; the
			// last reaches it.
			var requestedMilli int64
			for i, p := range arrived {
				if p.RequestedGPUMilli() == 0 {
					t.Fatalf("pod %d (%s) asks for no GPU", i, p.Name)
				}
				if float64(requestedMilli) >= tt.wantTargetMilli {
					t.Fatalf("pod %d arrived after the load reached %d milli of %v", i, requestedMilli, tt.wantTargetMilli)
				}
				requestedMilli += p.RequestedGPUMilli()
			}
			if float64(requestedMilli) < tt.wantTargetMilli {
				t.Fatalf("load ends at %d milli, below %v", requestedMilli, tt.wantTargetMilli)
			}
		})
	}
}

func TestFGDSampleIsDeterministic(t *testing.T) {
	pods, err := ReadFile(filepath.Join("testdata", "openb", "openb_pod_list_default.csv"), ReadOpenbPods)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		seedA     uint64
		seedB     uint64
		wantEqual bool
	}{
		{"same seed, same arrivals", 42, 42, true},
		{"other seed, other arrivals", 42, 43, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := FGDSample(pods, 200, 1.3, tt.seedA)
			b := FGDSample(pods, 200, 1.3, tt.seedB)
			if got := reflect.DeepEqual(a, b); got != tt.wantEqual {
				t.Fatalf("sequences equal = %v, want %v", got, tt.wantEqual)
			}
		})
	}
}
