// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTiresiasJobs(t *testing.T) {
	const header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
	runReadCases(t, "jobs.csv", ReadTiresiasJobs, []readCase[TiresiasJob]{
		{
			name:  "CRLF line endings",
			input: strings.ReplaceAll(header+"0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n", "\n", "\r\n"),
			want: []TiresiasJob{
				{ID: 0, GPUs: 1, Submit: 0, Duration: 164, Iterations: 606, Model: "vgg19", Interval: 30},
				{ID: 1, GPUs: 8, Submit: 30, Duration: 147, Iterations: 133, Model: "vgg11", Interval: 23},
			},
		},
		{
			name:    "repeated job",
			input:   header + "0,1,0,606,vgg19,164,30\n0,8,30,133,vgg11,147,23\n",
			wantErr: `jobs.csv:3: job_id "0": duplicate, first on line 2`,
		},
		{
			name:    "duration in minutes",
			input:   header + "0,1,0,606,vgg19,2.7m,30\n",
			wantErr: `jobs.csv:2: duration "2.7m": not an integer`,
		},
		{
			name:    "no model",
			input:   header + "0,1,0,606,,164,30\n",
			wantErr: `jobs.csv:2: model_name "": empty`,
		},
	})
}

func TestReadTiresiasCluster(t *testing.T) {
	const header = "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n"
	tests := []struct {
		name      string
		input     string
		want      TiresiasCluster
		wantNodes int
		wantGPUs  int
		wantErr   string
	}{
		{
			name:      "no final newline, as published",
			input:     header + "5,32,8,128,256",
			want:      TiresiasCluster{Switches: 5, NodesPerSwitch: 32, GPUsPerNode: 8, CPUsPerNode: 128, MemoryGiB: 256},
			wantNodes: 160,  // 5 x 32
			wantGPUs:  1280, // 160 x 8
		},
		{
			name:      "final blank line",
			input:     header + "1,1,4,40,256\n\n",
			want:      TiresiasCluster{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 4, CPUsPerNode: 40, MemoryGiB: 256},
			wantNodes: 1,
			wantGPUs:  4,
		},
		{
			name:    "two clusters",
			input:   header + "5,32,8,128,256\n8,32,8,64,256\n",
			wantErr: "cluster.csv:3: 2 data rows, want exactly 1",
		},
		{
			name:    "no GPUs",
			input:   header + "5,32,0,128,256",
			wantErr: `cluster.csv:2: num_gpu_p_node "0": a cluster needs at least 1`,
		},
		{
			name:    "no nodes",
			input:   header + "5,00,8,128,256",
			wantErr: `cluster.csv:2: num_node_p_switch "00": a cluster needs at least 1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTiresiasCluster(strings.NewReader(tt.input), "cluster.csv")
			if tt.wantErr != "" {
				checkParseError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got.Nodes() != tt.wantNodes || got.GPUs() != tt.wantGPUs {
				t.Fatalf("got %d nodes and %d GPUs, want %d and %d", got.Nodes(), got.GPUs(), tt.wantNodes, tt.wantGPUs)
			}
		})
	}
}

func TestReadTiresiasTestdata(t *testing.T) {
	t.Run("60_job", func(t *testing.T) {
		jobs, err := ReadFile(filepath.Join("testdata", "tiresias", "60_job.csv"), ReadTiresiasJobs)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, jobs[:1], []TiresiasJob{{ID: 0, GPUs: 1, Submit: 0, Duration: 164, Iterations: 606, Model: "vgg19", Interval: 30}})
		for i := 1; i < len(jobs); i++ {
			if jobs[i-1].Submit+jobs[i-1].Interval != jobs[i].Submit {
				t.Errorf("job %d submitted at %d, want %d + %d", jobs[i].ID, jobs[i].Submit, jobs[i-1].Submit, jobs[i-1].Interval)
			}
		}
	})
	clusters := []struct {
		file     string
		wantGPUs int
	}{
		{"n160g8.csv", 1280},
		{"n1g4.csv", 4},
	}
	for _, tt := range clusters {
		t.Run(tt.file, func(t *testing.T) {
			c, err := ReadFile(filepath.Join("testdata", "tiresias", tt.file), ReadTiresiasCluster)
			if err != nil {
				t.Fatal(err)
			}
			if c.GPUs() != tt.wantGPUs {
				t.Fatalf("got %d GPUs, want %d", c.GPUs(), tt.wantGPUs)
			}
		})
	}
}
