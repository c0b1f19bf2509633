// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// +k8s:deepcopy-gen=package
// +groupName=kubescheduler.config.k8s.io

// Package config holds the internal types of sluice's plugin arguments.
//
// The types live in kube-scheduler's config group
// (kubescheduler.config.k8s.io), as in-tree and scheduler-plugins args do:
// kube-scheduler finds the args of plugin X by the kind "XArgs" in that
// group, so a pluginConfig entry needs no apiVersion or kind of its own.
package config
