// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command sluice-scheduler is kube-scheduler with sluice's plugins compiled
// in. Everything kube-scheduler offers (flags, --config, leader election,
// /metrics, /healthz, feature gates) comes from kube-scheduler itself.
//
// The Makefile stamps versions through -ldflags -X: k8s.io/component-base/
// version carries the Kubernetes version sluice is built on (kube-scheduler
// and feature gates rely on it), and verflag's program name carries
// sluice's own version, so --version prints e.g.
//
//	sluice-scheduler v0.1.0 built on Kubernetes v1.37.2
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/sluice-sched/sluice/pkg/registry"
)

func main() {
	cmd := app.NewSchedulerCommand(registry.New().Options()...)
	cmd.Use = "sluice-scheduler"
	os.Exit(cli.Run(cmd))
}
