// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"errors"
	"io"
	"math"
)

// NoPerNodeLimit is the DLRMInstance.MaxPerNode value (-1 in the trace) of
// a service that puts no limit on its instances per node.
const NoPerNodeLimit = -1

// DLRMInstance is one instance of an inference service in the Alibaba 2025
// disaggregated DLRM trace (alibaba_v2025_disaggregated_DLRM_trace.csv).
//
// Units, checked against the published file: cpu_request is in cores (2 to
// 192), memory_request in GiB (16.0 to 1000.0; 5 GiB a core on most CPU
// instances), times in seconds from the trace's start written as decimals
// with float noise ("475.00000000000006"), which are rounded to whole
// seconds. In that file every HN instance asks for 1 GPU and every CN
// instance for none.
type DLRMInstance struct {
	// Name is instance_sn, e.g. "instance_0".
	Name string
	// Role is the instance's role in the disaggregated service: "HN" (a GPU
	// instance) or "CN" (a CPU instance) in the published file.
	Role string
	// App is app_name, the service the instance belongs to, e.g. "app_0".
	App string
	// MilliCPU is cpu_request converted from cores to thousandths of a core.
	MilliCPU int64
	// GPUs is gpu_request, whole GPUs.
	GPUs int
	// MemoryGiB is memory_request in GiB.
	MemoryGiB float64
	// MaxPerNode is max_instance_per_node: at most this many instances of
	// the service on one node, or NoPerNodeLimit.
	MaxPerNode int
	// Created, Scheduled and Deleted are creation_time, scheduled_time and
	// deletion_time in seconds, 0 when empty. In the published file creation and scheduling are
	// empty together, for the first 7,280 instances (presumably running
	// before the trace starts), and deletion for the 8,878 still running
	// when it ends.
	Created, Scheduled, Deleted int64
}

func dlrmSchema() schema {
	return schema{
		required: []string{
			"instance_sn", "role", "app_name", "cpu_request", "gpu_request", "memory_request",
			"max_instance_per_node", "creation_time", "scheduled_time", "deletion_time",
		},
		ignored: []string{
			"cpu_limit", "gpu_limit", "rdma_request", "rdma_limit", "memory_limit", "disk_request", "disk_limit",
		},
	}
}

// ReadDLRMInstances reads the DLRM inference trace. Limits, RDMA and disk
// columns are ignored. Instance names must be unique; max_instance_per_node
// must be -1 or at least 1.
func ReadDLRMInstances(r io.Reader, name string) ([]DLRMInstance, error) {
	t, err := newTable(r, name, dlrmSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "instance_sn", func(r *row) DLRMInstance {
		in := DLRMInstance{
			Name:      r.name("instance_sn"),
			Role:      r.name("role"),
			App:       r.name("app_name"),
			MilliCPU:  milliCores(r, "cpu_request"),
			GPUs:      r.int("gpu_request"),
			MemoryGiB: r.float("memory_request"),
			Created:   r.optionalSeconds("creation_time"),
			Scheduled: r.optionalSeconds("scheduled_time"),
			Deleted:   r.optionalSeconds("deletion_time"),
		}
		if r.text("max_instance_per_node") == "-1" {
			in.MaxPerNode = NoPerNodeLimit
		} else if in.MaxPerNode = r.int("max_instance_per_node"); r.err == nil && in.MaxPerNode == 0 {
			r.fail("max_instance_per_node", errors.New("0 allows no instance anywhere; want -1 or at least 1"))
		}
		return in
	})
}

// milliCores reads a CPU amount in cores ("12", "0.5") as thousandths of a
// core, which must come out whole.
func milliCores(r *row, column string) int64 {
	cores := r.float(column)
	if r.err != nil {
		return 0
	}
	milli := math.Round(cores * 1000)
	switch {
	case milli > math.MaxInt64/2:
		r.fail(column, errors.New("out of range"))
		return 0
	case math.Abs(milli-cores*1000) > 1e-6:
		r.fail(column, errors.New("finer than a thousandth of a core"))
		return 0
	}
	return int64(milli)
}
