// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package procs

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestStopAllSaysWhatItStops: tearing down names every process it stops,
// the last started first, and each has ended when stopAll returns.
func TestStopAllSaysWhatItStops(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	var ps Set
	var started []*Process
	for _, name := range []string{"first", "second"} {
		p, err := Start(name, sleep, filepath.Join(t.TempDir(), name+".log"), "60")
		if err != nil {
			t.Fatal(err)
		}
		ps.Add(p)
		started = append(started, p)
	}
	var said []string
	ps.StopAll(func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) })
	want := []string{
		fmt.Sprintf("stopping second (pid %d)", started[1].cmd.Process.Pid),
		fmt.Sprintf("stopping first (pid %d)", started[0].cmd.Process.Pid),
	}
	if !slices.Equal(said, want) {
		t.Errorf("said %q, want %q", said, want)
	}
	for _, p := range started {
		if done, _ := p.Exited(); !done {
			t.Errorf("%s still runs after stopAll", p.name)
		}
	}
}
