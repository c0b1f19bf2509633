// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"errors"
	"fmt"
	"io"
)

// TiresiasJob is one job of a Tiresias workload (Gu et al., NSDI 2019), as in
// tiresias/60_job.csv: job_id,num_gpu,submit_time,iterations,model_name,
// duration,interval. Times are in seconds.
type TiresiasJob struct {
	// ID is job_id.
	ID int
	// GPUs is num_gpu, the gang size: 1, 2, 4 or 8 in 60_job.csv.
	GPUs int
	// Submit is submit_time, seconds from the trace's start.
	Submit int64
	// Duration is the job's run time in seconds when it has its GPUs.
	Duration int64
	// Iterations is the number of training iterations.
	Iterations int
	// Model is the DNN the job trains, e.g. "vgg19" or "resnet50".
	Model string
	// Interval is the gap in seconds from this job's submission to the next
	// one's; in 60_job.csv Submit[i] + Interval[i] == Submit[i+1], and the
	// last job's Interval points past the end of the file.
	Interval int64
}

func tiresiasJobSchema() schema {
	return schema{required: []string{"job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"}}
}

// ReadTiresiasJobs reads a Tiresias job file. Job IDs must be unique.
func ReadTiresiasJobs(r io.Reader, name string) ([]TiresiasJob, error) {
	t, err := newTable(r, name, tiresiasJobSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "job_id", func(r *row) TiresiasJob {
		return TiresiasJob{
			ID:         r.int("job_id"),
			GPUs:       r.int("num_gpu"),
			Submit:     r.int64("submit_time"),
			Iterations: r.int("iterations"),
			Model:      r.name("model_name"),
			Duration:   r.int64("duration"),
			Interval:   r.int64("interval"),
		}
	})
}

// TiresiasCluster is a Tiresias cluster shape, as in tiresias/n160g8.csv:
// Switches x NodesPerSwitch nodes of GPUsPerNode GPUs, one tier of switches.
type TiresiasCluster struct {
	// Switches is num_switch.
	Switches int
	// NodesPerSwitch is num_node_p_switch.
	NodesPerSwitch int
	// GPUsPerNode is num_gpu_p_node.
	GPUsPerNode int
	// CPUsPerNode is num_cpu_p_node, in cores.
	CPUsPerNode int
	// MemoryGiB is mem_p_node, the memory of a node in GiB.
	MemoryGiB int
}

// Nodes is the number of nodes in the cluster: n160g8 has 5 x 32 = 160.
func (c TiresiasCluster) Nodes() int { return c.Switches * c.NodesPerSwitch }

// GPUs is the number of GPUs in the cluster: n160g8 has 160 x 8 = 1,280.
func (c TiresiasCluster) GPUs() int { return c.Nodes() * c.GPUsPerNode }

func tiresiasClusterSchema() schema {
	return schema{required: []string{"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"}}
}

// ReadTiresiasCluster reads a Tiresias cluster file, which has exactly one
// data row (the published files have no newline after it). Every count must
// be at least 1.
func ReadTiresiasCluster(r io.Reader, name string) (TiresiasCluster, error) {
	t, err := newTable(r, name, tiresiasClusterSchema())
	if err != nil {
		return TiresiasCluster{}, err
	}
	var lines []int
	clusters, err := readRows(t, "", func(r *row) TiresiasCluster {
		lines = append(lines, r.line)
		c := TiresiasCluster{
			Switches:       r.int("num_switch"),
			NodesPerSwitch: r.int("num_node_p_switch"),
			GPUsPerNode:    r.int("num_gpu_p_node"),
			CPUsPerNode:    r.int("num_cpu_p_node"),
			MemoryGiB:      r.int("mem_p_node"),
		}
		for _, count := range []struct {
			column string
			value  int
		}{
			{"num_switch", c.Switches},
			{"num_node_p_switch", c.NodesPerSwitch},
			{"num_gpu_p_node", c.GPUsPerNode},
			{"num_cpu_p_node", c.CPUsPerNode},
			{"mem_p_node", c.MemoryGiB},
		} {
			if r.err == nil && count.value == 0 {
				r.fail(count.column, errors.New("a cluster needs at least 1"))
			}
		}
		return c
	})
	if err != nil {
		return TiresiasCluster{}, err
	}
	if len(clusters) > 1 {
		return TiresiasCluster{}, &ParseError{File: name, Line: lines[1], Err: fmt.Errorf("%d data rows, want exactly 1", len(clusters))}
	}
	return clusters[0], nil
}
