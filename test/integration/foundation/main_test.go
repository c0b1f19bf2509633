// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"testing"

	"github.com/sluice-sched/sluice/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
