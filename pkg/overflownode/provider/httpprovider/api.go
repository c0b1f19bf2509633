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
//	GET    /v1/workloads/{id}/logs?container=C[&tailLines=N][&follow=true]
//	       [&timestamps=true][&previous=true][&sinceTime=RFC3339][&limitBytes=N]
//	                                   -> text/plain, streamed while follow; 404
//	                                      when absent, 501 when the provider keeps no logs
//	GET    /v1/usage?node=NODE         -> UsageList; 404 or 501 when the provider
//	                                      measures nothing (optional)
//
// A workload reports its addresses: the IPs at which its container ports
// are reachable from the home cluster's network. The node publishes them
// as the pod's IPs, so a Service selecting the pod sends traffic there.
//
// Errors are {"error": "..."}; 422 means the provider cannot run the
// workload as written. Requests carry "Authorization: Bearer <token>"
// when a token file is configured.
//
// Over https (only), a workload may read Secrets and ConfigMaps: the
// request carries their data (secrets, configMaps) and the containers
// refer to them by name (env valueFrom, envFrom, volumes), as a pod does.
// A PUT for an existing id carries the current data; the provider updates
// its copies. A provider keeps the data as secrets and never logs it;
// sluice never logs it either.
package httpprovider

import (
	"time"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

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
	// Volumes the containers mount: emptyDir, or a Secret or ConfigMap of
	// the request.
	Volumes []Volume `json:"volumes,omitempty"`
	// Secrets and ConfigMaps are the home objects the workload reads, by
	// name, with their data (sent only over https).
	Secrets    []Object `json:"secrets,omitempty"`
	ConfigMaps []Object `json:"configMaps,omitempty"`
	// ImagePullSecrets name Secrets of the request (of type
	// kubernetes.io/dockerconfigjson data) to pull the images with, in
	// order; for this workload only.
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
}

// Object is a Secret or ConfigMap: its name and data (base64 in JSON).
type Object struct {
	Name string            `json:"name"`
	Data map[string][]byte `json:"data"`
}

// Volume is a volume: exactly one of EmptyDir, Secret and ConfigMap.
type Volume struct {
	Name      string        `json:"name"`
	EmptyDir  *EmptyDir     `json:"emptyDir,omitempty"`
	Secret    *ObjectSource `json:"secret,omitempty"`
	ConfigMap *ObjectSource `json:"configMap,omitempty"`
}

// EmptyDir is scratch space.
type EmptyDir struct {
	// SizeLimit is a Kubernetes quantity, e.g. 10Gi.
	SizeLimit string `json:"sizeLimit,omitempty"`
}

// ObjectSource is a Secret or ConfigMap of the request as files: every
// key as a file, or the items listed.
type ObjectSource struct {
	Name     string      `json:"name"`
	Items    []KeyToPath `json:"items,omitempty"`
	Optional bool        `json:"optional,omitempty"`
}

// KeyToPath puts one key at a relative path.
type KeyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
}

// VolumeMount mounts a volume in a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	SubPath   string `json:"subPath,omitempty"`
}

// KeyRef is one key of a Secret or ConfigMap of the request.
type KeyRef struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional bool   `json:"optional,omitempty"`
}

// EnvSource is where an env var's value comes from: exactly one of
// Secret and ConfigMap.
type EnvSource struct {
	Secret    *KeyRef `json:"secret,omitempty"`
	ConfigMap *KeyRef `json:"configMap,omitempty"`
}

// EnvFrom sets an env var for every key of a Secret or ConfigMap of the
// request (exactly one of them), named Prefix + key.
type EnvFrom struct {
	Prefix    string     `json:"prefix,omitempty"`
	Secret    *ObjectRef `json:"secret,omitempty"`
	ConfigMap *ObjectRef `json:"configMap,omitempty"`
}

// ObjectRef names a Secret or ConfigMap of the request.
type ObjectRef struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

// Container is one container to run.
type Container struct {
	Name         string        `json:"name"`
	Image        string        `json:"image"`
	Command      []string      `json:"command,omitempty"`
	Args         []string      `json:"args,omitempty"`
	Env          []EnvVar      `json:"env,omitempty"`
	EnvFrom      []EnvFrom     `json:"envFrom,omitempty"`
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	Ports        []Port        `json:"ports,omitempty"`
	Resources    Resources     `json:"resources"`
}

// EnvVar is an environment variable: a literal value, or one key of a
// Secret or ConfigMap of the request.
type EnvVar struct {
	Name      string     `json:"name"`
	Value     string     `json:"value,omitempty"`
	ValueFrom *EnvSource `json:"valueFrom,omitempty"`
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

// UsageList is the body of GET /v1/usage: the latest measure of the
// node's running workloads (a workload not listed has none yet).
type UsageList struct {
	Items []WorkloadUsage `json:"items"`
}

// WorkloadUsage is what one workload's containers use, measured at
// Timestamp.
type WorkloadUsage struct {
	ID         string           `json:"id"`
	Timestamp  time.Time        `json:"timestamp"`
	Containers []ContainerUsage `json:"containers"`
}

// ContainerUsage is one container's use, in Kubernetes quantities: CPU in
// cores (a rate, e.g. "250m"), Memory its working set (e.g. "512Mi").
type ContainerUsage struct {
	Name   string `json:"name"`
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}
