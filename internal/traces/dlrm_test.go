// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"path/filepath"
	"testing"
)

func TestReadDLRMInstances(t *testing.T) {
	const header = "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,scheduled_time,deletion_time\n"
	runReadCases(t, "dlrm.csv", ReadDLRMInstances, []readCase[DLRMInstance]{
		{
			name: "published columns",
			input: header +
				"instance_0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n" +
				// Float noise in the times rounds to whole seconds.
				"instance_7280,CN,app_22,64,64,0,0,1,1,320.0,320.0,544.0,640.0,-1,475.00000000000006,623.0,4031.0000000000005\n" +
				"instance_2492,CN,app_42,0.5,192,0,0,51,51,937.5,937.5,510.0,600.0,2,,,17623.0\n",
			want: []DLRMInstance{
				{Name: "instance_0", Role: "HN", App: "app_0", MilliCPU: 12000, GPUs: 1, MemoryGiB: 120, MaxPerNode: 8},
				{Name: "instance_7280", Role: "CN", App: "app_22", MilliCPU: 64000, MemoryGiB: 320, MaxPerNode: NoPerNodeLimit, Created: 475, Scheduled: 623, Deleted: 4031},
				{Name: "instance_2492", Role: "CN", App: "app_42", MilliCPU: 500, MemoryGiB: 937.5, MaxPerNode: 2, Deleted: 17623},
			},
		},
		{
			name:  "only the columns read",
			input: "instance_sn,role,app_name,cpu_request,gpu_request,memory_request,max_instance_per_node,creation_time,scheduled_time,deletion_time\ni0,HN,a,8,1,40.0,4,1,2,3\n",
			want:  []DLRMInstance{{Name: "i0", Role: "HN", App: "a", MilliCPU: 8000, GPUs: 1, MemoryGiB: 40, MaxPerNode: 4, Created: 1, Scheduled: 2, Deleted: 3}},
		},
		{
			name:    "CPU finer than a millicore",
			input:   header + "i0,HN,a,0.0005,1,1,1,1,1,1,1,1,1,1,,,\n",
			wantErr: `dlrm.csv:2: cpu_request "0.0005": finer than a thousandth of a core`,
		},
		{
			name:    "memory with a unit",
			input:   header + "i0,HN,a,8,8,1,1,1,1,40Gi,40,1,1,1,,,\n",
			wantErr: `dlrm.csv:2: memory_request "40Gi": not a number`,
		},
		{
			name:    "infinite memory",
			input:   header + "i0,HN,a,8,8,1,1,1,1,Inf,40,1,1,1,,,\n",
			wantErr: `dlrm.csv:2: memory_request "Inf": not a finite number`,
		},
		{
			name:    "negative deletion time",
			input:   header + "i0,HN,a,8,8,1,1,1,1,40,40,1,1,1,,,-5\n",
			wantErr: `dlrm.csv:2: deletion_time "-5": negative`,
		},
		{
			name:    "per-node limit of 0",
			input:   header + "i0,HN,a,8,8,1,1,1,1,40,40,1,1,0,,,\n",
			wantErr: `dlrm.csv:2: max_instance_per_node "0": 0 allows no instance anywhere; want -1 or at least 1`,
		},
		{
			name:    "per-node limit of -2",
			input:   header + "i0,HN,a,8,8,1,1,1,1,40,40,1,1,-2,,,\n",
			wantErr: `dlrm.csv:2: max_instance_per_node "-2": negative`,
		},
		{
			name:    "huge time",
			input:   header + "i0,HN,a,8,8,1,1,1,1,40,40,1,1,1,1e300,,\n",
			wantErr: `dlrm.csv:2: creation_time "1e300": out of range`,
		},
	})
}

func TestReadDLRMTestdata(t *testing.T) {
	instances, err := ReadFile(filepath.Join("testdata", "alibaba_v2025_disaggregated_DLRM_trace.csv"), ReadDLRMInstances)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, instances[5:6], []DLRMInstance{
		{Name: "instance_7280", Role: "CN", App: "app_22", MilliCPU: 64000, MemoryGiB: 320, MaxPerNode: NoPerNodeLimit, Created: 475, Scheduled: 623},
	})
	for _, in := range instances {
		// In the published trace GPU instances are HN, CPU ones CN.
		if (in.Role == "HN") != (in.GPUs == 1) {
			t.Errorf("%s: role %s with %d GPUs", in.Name, in.Role, in.GPUs)
		}
		if (in.Created == 0) != (in.Scheduled == 0) {
			t.Errorf("%s: created at %d but scheduled at %d", in.Name, in.Created, in.Scheduled)
		}
	}
}
