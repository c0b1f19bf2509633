// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Fatal is the panic value of ProcessTB.FailNow; whoever runs code with a
// ProcessTB recovers it.
type Fatal string

// ProcessTB is a testing.TB that lives as long as the process (or until
// RunCleanups): kube-apiserver's test server wants a TB for logging and
// cleanups, and a *testing.T would stop the server when its own test
// ends. Tests' TestMain, the simulator and the demo use it.
type ProcessTB struct {
	name     string
	out      io.Writer
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// NewProcessTB returns a TB named name that logs to out.
func NewProcessTB(name string, out io.Writer) *ProcessTB { return &ProcessTB{name: name, out: out} }

func (tb *ProcessTB) Attr(key, value string) {}
func (tb *ProcessTB) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		tb.Fatalf("chdir %s: %v", dir, err)
	}
}
func (tb *ProcessTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// RunCleanups runs the registered cleanups, last first.
func (tb *ProcessTB) RunCleanups() {
	tb.mu.Lock()
	cleanups := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
func (tb *ProcessTB) Error(args ...any) { tb.Log(args...); tb.Fail() }
func (tb *ProcessTB) Errorf(format string, args ...any) {
	tb.Logf(format, args...)
	tb.Fail()
}
func (tb *ProcessTB) Fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}
func (tb *ProcessTB) FailNow() {
	tb.Fail()
	panic(Fatal("FailNow called"))
}
func (tb *ProcessTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}
func (tb *ProcessTB) Fatal(args ...any) { tb.Log(args...); tb.FailNow() }
func (tb *ProcessTB) Fatalf(format string, args ...any) {
	tb.Logf(format, args...)
	tb.FailNow()
}
func (tb *ProcessTB) Helper() {}
func (tb *ProcessTB) Log(args ...any) {
	fmt.Fprintln(tb.out, append([]any{tb.name + ":"}, args...)...)
}
func (tb *ProcessTB) Logf(format string, args ...any) {
	fmt.Fprintf(tb.out, tb.name+": "+format+"\n", args...)
}
func (tb *ProcessTB) Name() string { return tb.name }
func (tb *ProcessTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		tb.Fatalf("setenv %s: %v", key, err)
	}
	tb.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

// A package-wide control plane has nothing to skip: skipping would hide a
// missing component, so these fail instead.
func (tb *ProcessTB) Skip(args ...any)                 { tb.Fatal(append([]any{"skip requested:"}, args...)...) }
func (tb *ProcessTB) Skipf(format string, args ...any) { tb.Fatalf("skip requested: "+format, args...) }
func (tb *ProcessTB) SkipNow()                         { tb.Fatal("skip requested") }
func (tb *ProcessTB) Skipped() bool                    { return false }
func (tb *ProcessTB) TempDir() string {
	dir, err := os.MkdirTemp("", "sluice-harness")
	if err != nil {
		tb.Fatalf("temp dir: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
