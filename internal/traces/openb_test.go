// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadOpenbNodes(t *testing.T) {
	runReadCases(t, "nodes.csv", ReadOpenbNodes, []readCase[OpenbNode]{
		{
			name:  "GPU and CPU-only nodes",
			input: "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,262144,0,\n",
			want: []OpenbNode{
				{Name: "n0", MilliCPU: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100"},
				{Name: "n1", MilliCPU: 32000, MemoryMiB: 262144},
			},
		},
		{
			name:  "columns in another order",
			input: "model,gpu,sn,memory_mib,cpu_milli\nT4,4,n0,393216,96000\n",
			want:  []OpenbNode{{Name: "n0", MilliCPU: 96000, MemoryMiB: 393216, GPUs: 4, Model: "T4"}},
		},
		{
			name:    "GPU node without a model",
			input:   "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n",
			wantErr: `nodes.csv:2: model "": empty on a node with 2 GPUs`,
		},
		{
			name:    "memory is not a number",
			input:   "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,256Gi,2,P100\n",
			wantErr: `nodes.csv:2: memory_mib "256Gi": not an integer`,
		},
		{
			name:    "negative CPU",
			input:   "sn,cpu_milli,memory_mib,gpu,model\nn0,-1,1,0,\n",
			wantErr: `nodes.csv:2: cpu_milli "-1": negative`,
		},
		{
			name:    "empty name",
			input:   "sn,cpu_milli,memory_mib,gpu,model\n,1,1,0,\n",
			wantErr: `nodes.csv:2: sn "": empty`,
		},
		{
			name:    "repeated node",
			input:   "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\nn1,1,1,0,\nn0,1,1,0,\n",
			wantErr: `nodes.csv:4: sn "n0": duplicate, first on line 2`,
		},
		{
			name:    "GPU count too large",
			input:   "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,99999999999,A10\n",
			wantErr: `nodes.csv:2: gpu "99999999999": out of range`,
		},
	})
}

func TestReadOpenbPods(t *testing.T) {
	const fullHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	runReadCases(t, "pods.csv", ReadOpenbPods, []readCase[OpenbPod]{
		{
			name: "all columns",
			input: fullHeader +
				"p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
				"p1,6000,12288,1,460,V100M16|V100M32,BE,Running,427061,12902960,427061\n" +
				"p2,11908,47104,1,1000,,BE,Pending,10001278,10001403,\n" +
				"p3,20000,65536,0,0,,LS,Running,2759674,12902960,2759676\n",
			want: []OpenbPod{
				{Name: "p0", MilliCPU: 12000, MemoryMiB: 16384, GPUs: 1, GPUMilli: 1000, QoS: "LS", Phase: "Running", Deleted: 12537496},
				{Name: "p1", MilliCPU: 6000, MemoryMiB: 12288, GPUs: 1, GPUMilli: 460, GPUSpec: "V100M16|V100M32", QoS: "BE", Phase: "Running", Created: 427061, Deleted: 12902960, Scheduled: 427061},
				{Name: "p2", MilliCPU: 11908, MemoryMiB: 47104, GPUs: 1, GPUMilli: 1000, QoS: "BE", Phase: "Pending", Created: 10001278, Deleted: 10001403},
				{Name: "p3", MilliCPU: 20000, MemoryMiB: 65536, QoS: "LS", Phase: "Running", Created: 2759674, Deleted: 12902960, Scheduled: 2759676},
			},
		},
		{
			name:  "only the five required columns, as in multigpu50",
			input: "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,88000,327680,8,1000\n",
			want:  []OpenbPod{{Name: "p0", MilliCPU: 88000, MemoryMiB: 327680, GPUs: 8, GPUMilli: 1000}},
		},
		{
			name:  "columns in another order",
			input: "gpu_milli,num_gpu,qos,name,memory_mib,cpu_milli\n250,1,BE,p0,1024,2000\n",
			want:  []OpenbPod{{Name: "p0", MilliCPU: 2000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 250, QoS: "BE"}},
		},
		{
			name:    "missing num_gpu",
			input:   "name,cpu_milli,memory_mib,gpu_milli\np0,1,1,0\n",
			wantErr: `pods.csv:1: missing column "num_gpu" in header "name,cpu_milli,memory_mib,gpu_milli"`,
		},
		{
			name:    "misspelt optional column",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_tim\np0,1,1,0,0,5\n",
			wantErr: `pods.csv:1: unknown column "creation_tim" in header (known columns: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time)`,
		},
		{
			name:    "num_gpu is not an integer",
			input:   fullHeader + "p0,1,1,1,1000,,LS,Running,0,1,0\np1,1,1,x,1000,,LS,Running,0,1,0\n",
			wantErr: `pods.csv:3: num_gpu "x": not an integer`,
		},
		{
			name:    "fractional num_gpu",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,0.5,500\n",
			wantErr: `pods.csv:2: num_gpu "0.5": not an integer`,
		},
		{
			name:    "bad creation time",
			input:   fullHeader + "p0,1,1,1,1000,,LS,Running,yesterday,1,0\n",
			wantErr: `pods.csv:2: creation_time "yesterday": not an integer`,
		},
		{
			name:    "more than a whole GPU per device",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1200\n",
			wantErr: `pods.csv:2: gpu_milli "1200": more than 1000 thousandths of a GPU`,
		},
		{
			name:    "GPU share without a GPU",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,0,500\n",
			wantErr: `pods.csv:2: gpu_milli "500": not 0 on a pod with num_gpu 0`,
		},
		{
			name:    "GPUs with no share",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,2,0\n",
			wantErr: `pods.csv:2: gpu_milli "0": 0 on a pod with num_gpu 2`,
		},
		{
			name:    "quoted field spanning lines reports its first line",
			input:   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"p\n0\",1,1,1,x\n",
			wantErr: `pods.csv:2: gpu_milli "x": not an integer`,
		},
	})
}

func TestOpenbPodGPUs(t *testing.T) {
	tests := []struct {
		name           string
		pod            OpenbPod
		wantWhole      int
		wantFractional bool
		wantMilli      int64
	}{
		{"CPU-only", OpenbPod{}, 0, false, 0},
		{"46% share of one GPU rounds up to one", OpenbPod{GPUs: 1, GPUMilli: 460}, 1, true, 460},
		{"5% share", OpenbPod{GPUs: 1, GPUMilli: 50}, 1, true, 50},
		{"one whole GPU", OpenbPod{GPUs: 1, GPUMilli: 1000}, 1, false, 1000},
		{"eight whole GPUs", OpenbPod{GPUs: 8, GPUMilli: 1000}, 8, false, 8000},
		// Not in the published traces: part of each of two GPUs still
		// holds two devices.
		{"half of each of two GPUs", OpenbPod{GPUs: 2, GPUMilli: 500}, 2, false, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pod.WholeGPUs(); got != tt.wantWhole {
				t.Errorf("WholeGPUs() = %d, want %d", got, tt.wantWhole)
			}
			if got := tt.pod.Fractional(); got != tt.wantFractional {
				t.Errorf("Fractional() = %v, want %v", got, tt.wantFractional)
			}
			if got := tt.pod.RequestedGPUMilli(); got != tt.wantMilli {
				t.Errorf("RequestedGPUMilli() = %d, want %d", got, tt.wantMilli)
			}
		})
	}
}

func TestReadOpenbTestdata(t *testing.T) {
	t.Run("gpu node list", func(t *testing.T) {
		nodes, err := ReadFile(filepath.Join("testdata", "openb", "openb_node_list_gpu_node.csv"), ReadOpenbNodes)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, nodes[:2], []OpenbNode{
			{Name: "openb-node-0000", MilliCPU: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100"},
			{Name: "openb-node-0022", MilliCPU: 128000, MemoryMiB: 786432, GPUs: 8, Model: "G3"},
		})
		for _, n := range nodes {
			if n.GPUs == 0 || n.Model == "" {
				t.Errorf("%s: a GPU node list row with %d GPUs of model %q", n.Name, n.GPUs, n.Model)
			}
		}
	})
	t.Run("all node list has CPU-only nodes", func(t *testing.T) {
		nodes, err := ReadFile(filepath.Join("testdata", "openb", "openb_node_list_all_node.csv"), ReadOpenbNodes)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, nodes[:1], []OpenbNode{{Name: "openb-node-0000", MilliCPU: 32000, MemoryMiB: 262144}})
	})
	t.Run("default pod list", func(t *testing.T) {
		pods, err := ReadFile(filepath.Join("testdata", "openb", "openb_pod_list_default.csv"), ReadOpenbPods)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, pods[:2], []OpenbPod{
			{Name: "openb-pod-0000", MilliCPU: 12000, MemoryMiB: 16384, GPUs: 1, GPUMilli: 1000, QoS: "LS", Phase: "Running", Deleted: 12537496},
			{Name: "openb-pod-0001", MilliCPU: 6000, MemoryMiB: 12288, GPUs: 1, GPUMilli: 460, QoS: "LS", Phase: "Running", Created: 427061, Deleted: 12902960, Scheduled: 427061},
		})
		for _, p := range pods {
			if p.Phase == "Pending" && p.Scheduled != 0 {
				t.Errorf("%s: Pending but scheduled at %d", p.Name, p.Scheduled)
			}
			if p.Phase != "Pending" && p.Scheduled < p.Created {
				t.Errorf("%s: scheduled at %d before created at %d", p.Name, p.Scheduled, p.Created)
			}
		}
	})
	t.Run("multigpu50 pod list has five columns", func(t *testing.T) {
		pods, err := ReadFile(filepath.Join("testdata", "openb", "openb_pod_list_multigpu50.csv"), ReadOpenbPods)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, pods[4:5], []OpenbPod{{Name: "openb-pod-0017", MilliCPU: 88000, MemoryMiB: 327680, GPUs: 8, GPUMilli: 1000}})
	})
}

// FuzzReadOpenbPods checks that no input makes the reader panic, that every
// error is a *ParseError, and that every pod it accepts is consistent.
func FuzzReadOpenbPods(f *testing.F) {
	for _, name := range []string{"openb_pod_list_default.csv", "openb_pod_list_multigpu50.csv"} {
		data, err := os.ReadFile(filepath.Join("testdata", "openb", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(""))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,x\n"))
	f.Add([]byte("name,name\n\"a\nb\",\"c\n"))
	f.Add([]byte("\ufeffname,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,-1,9999999999999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ReadOpenbPods(strings.NewReader(string(data)), "fuzz.csv")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %T %q, want a *ParseError", err, err)
			}
			if pods != nil {
				t.Fatalf("got %d pods with an error", len(pods))
			}
			return
		}
		for _, p := range pods {
			if p.GPUMilli < 0 || p.GPUMilli > 1000 || p.GPUs < 0 || (p.GPUs == 0) != (p.GPUMilli == 0) {
				t.Fatalf("accepted an inconsistent pod %+v", p)
			}
		}
	})
}
