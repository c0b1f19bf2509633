// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"

type gangArgsV1 = configv1.GangArgs
