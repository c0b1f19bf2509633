// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

//go:build !linux

package harness

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's.
func dieWithParent() *syscall.SysProcAttr { return nil }
