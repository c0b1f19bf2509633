// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import "io"

// AcmeCluster is the GPUs-per-job summary of one cluster from the Acme
// study (Hu et al., "Characterization of Large Language Model Development in
// the Datacenter", NSDI 2024), as in acme_cluster_summary.csv.
type AcmeCluster struct {
	// Name is the cluster (column id): "Seren", "Kalos", "Philly",
	// "Helios" or "PAI".
	Name string
	// AvgGPUs is avg_gpu_num, the mean GPUs a GPU job asks for. It can be
	// below 1: PAI shares GPUs (0.683).
	AvgGPUs float64
	// MedGPUs is med_gpu_num, the median GPUs a GPU job asks for (0.5 on
	// PAI).
	MedGPUs float64
	// MaxGPUs is max_gpu, the largest GPU job.
	MaxGPUs float64
	// GPUJobs is gpu_job_num, the number of GPU jobs summarised.
	GPUJobs int
}

func acmeSchema() schema {
	return schema{
		required: []string{"id", "gpu_job_num", "avg_gpu_num", "med_gpu_num", "max_gpu"},
		ignored: []string{
			"job_num", "cpu_job_num",
			"avg_run_time_gpu", "avg_que_time_gpu", "med_run_time_gpu", "med_que_time_gpu", "max_run_time_gpu",
			"complete_rate_gpu", "cancel_rate_gpu", "fail_rate_gpu",
			"complete_gpu_time", "cancel_gpu_time", "fail_gpu_time",
			"complete_rate_gpu_time", "cancel_rate_gpu_time", "fail_rate_gpu_time",
			"avg_run_time_cpu", "avg_que_time_cpu", "med_run_time_cpu", "med_que_time_cpu",
			"complete_rate_cpu", "cancel_rate_cpu", "fail_rate_cpu",
		},
	}
}

// ReadAcmeSummary reads the Acme cluster summary. Only the GPUs-per-job
// columns are read; the run-time, queueing and completion columns (empty for
// some clusters) are checked to be known and otherwise ignored. Cluster names
// must be unique.
func ReadAcmeSummary(r io.Reader, name string) ([]AcmeCluster, error) {
	t, err := newTable(r, name, acmeSchema())
	if err != nil {
		return nil, err
	}
	return readRows(t, "id", func(r *row) AcmeCluster {
		return AcmeCluster{
			Name:    r.name("id"),
			AvgGPUs: r.float("avg_gpu_num"),
			MedGPUs: r.float("med_gpu_num"),
			MaxGPUs: r.float("max_gpu"),
			GPUJobs: r.int("gpu_job_num"),
		}
	})
}
