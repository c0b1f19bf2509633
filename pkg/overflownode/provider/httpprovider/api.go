// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package httpprovider is the "http" overflow provider: a GPU cloud that
// implements a small JSON-over-HTTP contract (docs/overflow-http-provider.yaml,
// OpenAPI 3) can take overflowed pods without any Go code:
//
//	GET    /v1/health                  -> Health
//	GET    /v1/capacity?node=NODE      -> Capacity
//	PUT    /v1/workloads/{id}          <- CreateRequest; 201 created, 200 already there
//	GET    /v1/workloads/{id}          -> provider.Workload; 404 when absent
//	GET    /v1/workloads?node=NODE     -> WorkloadList
//	DELETE /v1/workloads/{id}          -> 200, 202 or 204; 404 counts as deleted
//
// Errors are {"error": "..."}; 422 means the provider cannot run the
// workload as written. Requests carry "Authorization: Bearer <token>"
// when a token file is configured.
package httpprovider

import "github.com/sluice-sched/sluice/pkg/overflownode/provider"

// CreateRequest is the body of PUT /v1/workloads/{id}.
type CreateRequest struct {
	ID   string          `json:"id"`
	Node string          `json:"node"`
	Pod  provider.PodRef `json:"pod"`
	// Labels are the home pod's labels.
	Labels         map[string]string `json:"labels,omitempty"`
	Containers     []Container       `json:"containers"`
	InitContainers []Container       `json:"initContainers,omitempty"`
	// RestartPolicy is Always, OnFailure or Never.
	RestartPolicy string `json:"restartPolicy"`
}

// Container is one container to run.
type Container struct {
	Name      string    `json:"name"`
	Image     string    `json:"image"`
	Command   []string  `json:"command,omitempty"`
	Args      []string  `json:"args,omitempty"`
	Env       []EnvVar  `json:"env,omitempty"`
	Ports     []Port    `json:"ports,omitempty"`
	Resources Resources `json:"resources"`
}

// EnvVar is a literal environment variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Port is a container port.
type Port struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// Resources are Kubernetes quantities by resource name, e.g.
// {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}.
type Resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// WorkloadList is the body of GET /v1/workloads.
type WorkloadList struct {
	Items []provider.Workload `json:"items"`
}

// Health is the body of GET /v1/health.
type Health struct {
	Healthy bool   `json:"healthy"`
	Message string `json:"message,omitempty"`
}

// Capacity is the body of GET /v1/capacity: the total the provider can run
// for the node, in Kubernetes quantities.
type Capacity struct {
	Resources map[string]string `json:"resources"`
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}
