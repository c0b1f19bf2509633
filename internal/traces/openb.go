// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"errors"
	"fmt"
	"io"
)

// OpenbNode is one node of the Alibaba openb GPU cluster trace
// (openb_node_list_gpu_node.csv and openb_node_list_all_node.csv, columns
// sn,cpu_milli,memory_mib,gpu,model).
type OpenbNode struct {
	// Name is the node's serial name, e.g. "openb-node-0000".
	Name string
	// MilliCPU is the node's CPU in thousandths of a core.
	MilliCPU int64
	// MemoryMiB is the node's memory in MiB.
	MemoryMiB int64
	// GPUs is the number of GPUs on the node.
	GPUs int
	// Model is the GPU model, e.g. "V100M16" or "T4"; empty on a node
	// without GPUs.
	Model string
}

func openbNodeSchema() schema {
	return schema{required: []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}}
}

// ReadOpenbNodes reads an openb node list. Node names must be unique, and a
// node with GPUs must name its GPU model.
func ReadOpenbNodes(r io.Reader, name string) ([]OpenbNode, error) {
	t, err := newTable(r, name, openbNodeSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "sn", func(r *row) OpenbNode {
		n := OpenbNode{
			Name:      r.name("sn"),
			MilliCPU:  r.int64("cpu_milli"),
			MemoryMiB: r.int64("memory_mib"),
			GPUs:      r.int("gpu"),
			Model:     r.text("model"),
		}
		if r.err == nil && n.GPUs > 0 && n.Model == "" {
			r.fail("model", fmt.Errorf("empty on a node with %d GPUs", n.GPUs))
		}
		return n
	})
}

// OpenbPod is one pod of an openb pod list (openb_pod_list_*.csv).
//
// A pod asks for GPUs as num_gpu x gpu_milli: {GPUs: 2, GPUMilli: 1000} is two
// whole GPUs, {GPUs: 1, GPUMilli: 460} is 46% of one shared GPU, and {GPUs: 0,
// GPUMilli: 0} is a CPU-only pod.
type OpenbPod struct {
	// Name is the pod's name in the trace, e.g. "openb-pod-0001".
	Name string
	// MilliCPU is the CPU request in thousandths of a core.
	MilliCPU int64
	// MemoryMiB is the memory request in MiB.
	MemoryMiB int64
	// GPUs is num_gpu: how many GPUs the pod uses.
	GPUs int
	// GPUMilli is gpu_milli: the thousandths of each of those GPUs it uses,
	// 1..1000 for a GPU pod and 0 for a CPU-only one.
	GPUMilli int
	// GPUSpec is the GPU models the pod accepts (gpu_spec), empty when any
	// model will do, as in every row of the published files.
	GPUSpec string
	// QoS is the pod's class in the trace: "LS", "BE", "Burstable" or
	// "Guaranteed"; empty when the file has no qos column.
	QoS string
	// Phase is the pod's phase at the end of the trace: "Running",
	// "Pending", "Succeeded" or "Failed"; empty when the file has no
	// pod_phase column.
	Phase string
	// Created, Deleted and Scheduled are seconds from the trace's start,
	// 0 when the field is empty or the column absent. 0 is also a real time
	// (the first pod is created at 0); a pod that was never scheduled has
	// Phase "Pending".
	Created, Deleted, Scheduled int64
}

func openbPodSchema() schema {
	return schema{
		required: []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
		optional: []string{"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"},
	}
}

// ReadOpenbPods reads an openb pod list. The five resource columns are
// required and the rest optional (openb_pod_list_multigpu*.csv have only the
// five). Pod names must be unique; gpu_milli must be 0 when num_gpu is 0 and
// 1..1000 otherwise.
func ReadOpenbPods(r io.Reader, name string) ([]OpenbPod, error) {
	t, err := newTable(r, name, openbPodSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "name", func(r *row) OpenbPod {
		p := OpenbPod{
			Name:      r.name("name"),
			MilliCPU:  r.int64("cpu_milli"),
			MemoryMiB: r.int64("memory_mib"),
			GPUs:      r.int("num_gpu"),
			GPUMilli:  r.int("gpu_milli"),
			GPUSpec:   r.text("gpu_spec"),
			QoS:       r.text("qos"),
			Phase:     r.text("pod_phase"),
			Created:   r.optionalInt64("creation_time"),
			Deleted:   r.optionalInt64("deletion_time"),
			Scheduled: r.optionalInt64("scheduled_time"),
		}
		switch {
		case r.err != nil:
		case p.GPUMilli > 1000:
			r.fail("gpu_milli", errors.New("more than 1000 thousandths of a GPU"))
		case p.GPUs == 0 && p.GPUMilli != 0:
			r.fail("gpu_milli", errors.New("not 0 on a pod with num_gpu 0"))
		case p.GPUs > 0 && p.GPUMilli == 0:
			r.fail("gpu_milli", fmt.Errorf("0 on a pod with num_gpu %d", p.GPUs))
		}
		return p
	})
}

// WholeGPUs is the number of GPUs the pod would request as a Kubernetes
// extended resource (nvidia.com/gpu), which cannot be split: a GPU share
// rounds up to one whole GPU.
//
//	{GPUs: 0, GPUMilli: 0}    -> 0
//	{GPUs: 1, GPUMilli: 460}  -> 1 (a share takes a whole GPU)
//	{GPUs: 1, GPUMilli: 1000} -> 1
//	{GPUs: 8, GPUMilli: 1000} -> 8
func (p OpenbPod) WholeGPUs() int {
	// num_gpu already counts the GPUs the pod touches; only gpu_milli can be
	// fractional, and a fraction still occupies the whole device.
	return p.GPUs
}

// Fractional reports whether the pod shares one GPU: num_gpu is 1 and
// gpu_milli is below 1000.
func (p OpenbPod) Fractional() bool {
	return p.GPUs == 1 && p.GPUMilli < 1000
}

// RequestedGPUMilli is the GPU the pod really uses, num_gpu x gpu_milli, in
// thousandths of a GPU; the FGD paper counts load this way. A 460-milli share
// is 460, a two-GPU pod is 2000.
func (p OpenbPod) RequestedGPUMilli() int64 {
	return int64(p.GPUs) * int64(p.GPUMilli)
}
