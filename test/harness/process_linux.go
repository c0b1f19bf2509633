// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import "syscall"

// dieWithParent has the kernel kill a child when the test binary dies,
// so a test that panics or is killed by its timeout leaves no
// scheduler or overflow node running into the next package's tests.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
