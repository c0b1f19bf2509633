// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Helm runs the pinned helm CLI (bin/helm, which `make integration`
// builds; $SLUICE_HELM points at another) with args, in the module root,
// and returns its standard output. A missing binary fails the test,
// saying how to build it.
func Helm(t testing.TB, args ...string) []byte {
	t.Helper()
	root := ModuleRoot(t)
	bin := os.Getenv("SLUICE_HELM")
	if bin == "" {
		bin = filepath.Join(root, "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no helm at %s (run `make bin/helm`, or set SLUICE_HELM): %v", bin, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	// Helm's caches and configuration stay in the test's directory.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
