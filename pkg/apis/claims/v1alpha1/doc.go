// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// +k8s:deepcopy-gen=package
// +groupName=claims.sluice.dev

// Package v1alpha1 is the ResearchClaim API (claims.sluice.dev/v1alpha1):
// a research claim on physical GPUs, kept in the apiserver so that a new
// leader resumes it. The scheduler that plans a claim creates it; the claim
// engine (on the replica holding the controllers' Lease) carries it out and
// writes its status.
package v1alpha1
