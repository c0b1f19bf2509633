// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package procs starts and stops the binaries a local run needs (the
// demo's scheduler and overflow node): each in its own process group, its
// output in a log file, stopped as a whole.
package procs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is a binary that was started, in its own process group so that
// stopping it stops everything it started.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start runs bin with args, output to logFile.
func Start(name, bin, logFile string, args ...string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run `make build` first)", bin, err)
	}
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group (stopped as a whole), killed if the demo dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if done, _ := p.Exited(); done {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Set stops what was started, in reverse order, once.
type Set struct {
	mu    sync.Mutex
	procs []*Process
}

// Add keeps p, to be stopped with the others.
func (ps *Set) Add(p *Process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.procs = append(ps.procs, p)
}

// Remove forgets p (stopped on purpose, not a failure).
func (ps *Set) Remove(p *Process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, q := range ps.procs {
		if q == p {
			ps.procs = append(ps.procs[:i], ps.procs[i+1:]...)
			return
		}
	}
}

// StopAll stops every process, the last started first, saying which.
func (ps *Set) StopAll(say func(string, ...any)) {
	ps.mu.Lock()
	procs := ps.procs
	ps.procs = nil
	ps.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		if done, _ := procs[i].Exited(); !done {
			say("stopping %s (pid %d)", procs[i].name, procs[i].cmd.Process.Pid)
		}
		procs[i].Stop(10 * time.Second)
	}
}

// CheckPortFree fails with a clear message when a port is taken.
func CheckPortFree(port int, what string) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d (%s) is taken: %v; stop what uses it or choose another port with the flag", port, what, err)
	}
	return ln.Close()
}

// WaitHealthy polls url (https with any certificate, or http) until it
// answers 200, the process exits, or the deadline passes.
func WaitHealthy(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local self-signed serving certificate
	}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited (%v); see %s", p.name, err, p.log)
		}
		resp, err := client.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return errors.New(p.name + " did not become healthy at " + url + " within " + timeout.String() + "; see " + p.log)
}

// Alive fails when a process of the set has exited.
func (ps *Set) Alive() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.procs {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited (%v); see %s", p.name, err, p.log)
		}
	}
	return nil
}
