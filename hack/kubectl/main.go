// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command kubectl is upstream's kubectl at the Kubernetes version sluice
// builds against, for `make demo KEEP=1` on a machine without one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
