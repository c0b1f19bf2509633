// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"path/filepath"
	"testing"
)

func TestReadAcmeSummary(t *testing.T) {
	runReadCases(t, "acme.csv", ReadAcmeSummary, []readCase[AcmeCluster]{
		{
			name:  "GPU columns with empty ignored ones",
			input: "id,gpu_job_num,avg_gpu_num,med_gpu_num,max_gpu,fail_rate_cpu\nPAI,1037085,0.683,0.5,8.0,\n",
			want:  []AcmeCluster{{Name: "PAI", AvgGPUs: 0.683, MedGPUs: 0.5, MaxGPUs: 8, GPUJobs: 1037085}},
		},
		{
			name:    "empty mean",
			input:   "id,gpu_job_num,avg_gpu_num,med_gpu_num,max_gpu\nPAI,1037085,,0.5,8.0\n",
			wantErr: `acme.csv:2: avg_gpu_num "": not a number`,
		},
		{
			name:    "NaN max",
			input:   "id,gpu_job_num,avg_gpu_num,med_gpu_num,max_gpu\nPAI,1037085,0.683,0.5,NaN\n",
			wantErr: `acme.csv:2: max_gpu "NaN": not a finite number`,
		},
	})
}

func TestReadAcmeTestdata(t *testing.T) {
	clusters, err := ReadFile(filepath.Join("testdata", "acme_cluster_summary.csv"), ReadAcmeSummary)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, clusters[1:2], []AcmeCluster{{Name: "Kalos", AvgGPUs: 26.77, MedGPUs: 1, MaxGPUs: 1024, GPUJobs: 19907}})
	if len(clusters) != 5 {
		t.Fatalf("got %d clusters, want 5", len(clusters))
	}
}
