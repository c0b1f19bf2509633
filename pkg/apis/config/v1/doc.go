// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/sluice-sched/sluice/pkg/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io

// Package v1 is the versioned form of sluice's plugin args, as written in a
// KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1). It equals
// the internal types except that optional fields are pointers, so
// conversions are generated.
package v1
