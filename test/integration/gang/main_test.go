// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package gang tests gang placement end to end: the sluice-research profile
// of the real scheduler against a real apiserver, with gangs of both
// PodGroup APIs.
package gang

import (
	"testing"

	"github.com/sluice-sched/sluice/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.WithCRDs("manifests/crds/scheduling.x-k8s.io_podgroups.yaml"))
}
