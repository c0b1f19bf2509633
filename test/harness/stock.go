// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/internal/localcluster"
)

// StartStockControlPlane starts a control plane of the test's own that
// does not serve the native Workload API (scheduling.k8s.io/v1beta1), as
// most managed clusters of 1.37 are, with the namespace controller, the
// garbage collector and ClusterRole aggregation (admin, edit, view); it
// stops when the test ends. The in-process
// apiserver shares this process's feature gates, so only the API is off:
// components under test run as processes with flags of their own.
func StartStockControlPlane(t testing.TB) *ControlPlane {
	t.Helper()
	return StartOwnControlPlane(t, kcm.Set{Cleanup: true, RoleAggregation: true}, "--runtime-config=scheduling.k8s.io/v1beta1=false")
}

// StartOwnControlPlane starts a control plane of the test's own, with the
// chosen kube-controller-manager controllers in this process and the
// apiserver's extra flags; it stops when the test ends.
func StartOwnControlPlane(t testing.TB, set kcm.Set, flags ...string) *ControlPlane {
	t.Helper()
	cp, err := localcluster.StartControlPlane(t, filepath.Join(t.TempDir(), "etcd.log"), flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := kcm.Start(ctx, cp.Config, set); err != nil {
		t.Fatalf("controllers of the test's control plane: %v", err)
	}
	return cp
}
