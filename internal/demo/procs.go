// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package demo

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

// process is a binary the demo started, in its own process group so that
// stopping it stops everything it started.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProcess runs bin with args, output to logFile.
func startProcess(name, bin, logFile string, args ...string) (*process, error) {
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
	p := &process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
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

// processes stops what was started, in reverse order, once.
type processes struct {
	mu    sync.Mutex
	procs []*process
}

func (ps *processes) add(p *process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.procs = append(ps.procs, p)
}

// remove forgets p (stopped on purpose, not a failure).
func (ps *processes) remove(p *process) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, q := range ps.procs {
		if q == p {
			ps.procs = append(ps.procs[:i], ps.procs[i+1:]...)
			return
		}
	}
}

// stopAll stops every process, the last started first, saying which.
func (ps *processes) stopAll(say func(string, ...any)) {
	ps.mu.Lock()
	procs := ps.procs
	ps.procs = nil
	ps.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		if done, _ := procs[i].exited(); !done {
			say("stopping %s (pid %d)", procs[i].name, procs[i].cmd.Process.Pid)
		}
		procs[i].stop(10 * time.Second)
	}
}

// checkPortFree fails with a clear message when a port is taken.
func checkPortFree(port int, what string) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d (%s) is taken: %v; stop what uses it or choose another port with the flag", port, what, err)
	}
	return ln.Close()
}

// waitHealthy polls url (https with any certificate, or http) until it
// answers 200, the process exits, or the deadline passes.
func waitHealthy(ctx context.Context, p *process, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local self-signed serving certificate
	}}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if done, err := p.exited(); done {
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
