// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"path/filepath"

	"github.com/sluice-sched/sluice/internal/localcluster"
)

// InstallCRDs creates the CRDs in files (paths relative to root) and waits
// until they are established and discoverable.
func InstallCRDs(cp *ControlPlane, root string, files ...string) error {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(root, f)
	}
	return localcluster.InstallCRDs(context.Background(), cp, paths...)
}
