// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// +k8s:deepcopy-gen=package
// +groupName=scheduling.x-k8s.io

// Package v1alpha1 holds the Go types of the scheduler-plugins PodGroup
// (scheduling.x-k8s.io/v1alpha1), written for sluice from its wire format:
// the scheduler-plugins Go module does not build against Kubernetes 1.37.
// sluice reads these objects through a dynamic informer and converts them.
package v1alpha1
