// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package demo plays the story sluice exists for on one machine: a local
// control plane (etcd and kube-apiserver in this process), the real
// sluice-scheduler and sluice-overflow-node binaries, the ReplicaSet,
// Deployment and disruption controllers, a node simulator, and a second
// control plane as the remote cluster the overflow node bursts into.
// Production inference fills the cluster, a research gang claims it,
// production overflows in PodDisruptionBudget-safe waves, the gang runs in
// the fewest leaves, ends, and production comes back. A live terminal view
// shows it; an HTML report keeps it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-sched/sluice/internal/invariants"
)

// Options configure a demo run.
type Options struct {
	// Bin holds sluice-scheduler and sluice-overflow-node.
	Bin string
	// Manifests is the manifests/ directory (the shipped configuration).
	Manifests string
	// Out receives the report, logs and kubeconfig.
	Out string
	// The fabric: Spines x LeavesPerSpine leaves of NodesPerLeaf nodes.
	Spines, LeavesPerSpine, NodesPerLeaf, GPUsPerNode int
	// Deployments share the cluster's GPUs (one GPU a replica).
	Deployments int
	// GangPods is the research gang's size in whole nodes.
	GangPods int
	// Hold is how long the gang trains; ReturnHysteresis how long GPUs
	// stay free before production returns.
	Hold, ReturnHysteresis time.Duration
	// StartupDelay is how long a simulated container takes to start on a
	// physical node; RemoteStartupDelay at the provider (a cold start:
	// image pull and model load).
	StartupDelay, RemoteStartupDelay time.Duration
	// StepTimeout bounds every step.
	StepTimeout time.Duration
	// Ports the binaries serve on; the demo fails if one is taken.
	SchedulerPort, OverflowPort, KubeletPort int
	// Keep leaves the cluster up after the story until interrupted.
	Keep bool
	// Kubectl is the kubectl the KEEP message names (make demo KEEP=1
	// builds one into bin/); empty: the one on PATH.
	Kubectl string
	// Slurm, when set, is a real Slurm (hack/slurm-up.sh) whose node state
	// sluice reads; the demo drains a node halfway through.
	Slurm *Slurm
	// Stdout is where the view goes; TTY draws the live map.
	Stdout io.Writer
	TTY    bool
}

// Slurm is a running Slurm's slurmrestd.
type Slurm struct {
	URL, TokenFile string
	// Nodes is how many Slurm nodes there are (gpu01..gpuNN).
	Nodes int
}

// demo is one run.
type demo struct {
	opts    *Options
	cluster *cluster
	obs     *observer
	view    *view
	mu      sync.Mutex // guards view
	result  result
	start   time.Time
	inv     *invariants.Watcher
}

// Run plays the demo; it stops everything it started before returning,
// also when ctx is cancelled (Ctrl-C), unless Keep holds the cluster up
// until then.
func Run(ctx context.Context, o *Options) (err error) {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	if o.Slurm != nil {
		if err := scontrolAvailable(); err != nil {
			return fmt.Errorf("SLURM=1: %w", err)
		}
	}
	d := &demo{opts: o, start: time.Now(), view: &view{out: o.Stdout, tty: o.TTY}}
	d.say("sluice demo: %d GPU nodes, a %d-GPU research gang, production overflowing to a remote cluster", o.Spines*o.LeavesPerSpine*o.NodesPerLeaf, o.GangPods*o.GPUsPerNode)
	c, err := up(ctx, o, d.say)
	if err != nil {
		return err
	}
	d.cluster = c
	// Everything the demo watches stops before the clusters do: an
	// apiserver waits up to a minute for open watches when it shuts down.
	ctx, stopWatching := context.WithCancel(ctx)
	defer func() {
		stopWatching()
		c.down(d.say)
		d.say("stopped everything the demo started")
		d.flush()
	}()
	d.view.nodes = c.nodes
	if d.obs, err = newObserver(ctx, c, o, d.start); err != nil {
		return err
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go d.loop(loopCtx, loopDone)

	storyErr := d.story(ctx)
	stopLoop()
	<-loopDone
	report := filepath.Join(o.Out, "report.html")
	if err := writeReport(report, d, storyErr); err != nil {
		return errors.Join(storyErr, err)
	}
	if storyErr != nil && ctx.Err() != nil {
		d.say("interrupted: stopping everything the demo started; partial report: %s", report)
		d.flush()
		return errors.New("interrupted")
	}
	if storyErr != nil {
		d.say("FAILED: %v", storyErr)
		d.say("report: %s; component logs: %s", report, filepath.Join(o.Out, "logs"))
		d.flush()
		return storyErr
	}
	d.say("done in %.0fs; report: %s", time.Since(d.start).Seconds(), report)
	if o.Keep {
		kubeconfig := filepath.Join(o.Out, "kubeconfig")
		if err := c.writeKubeconfig(kubeconfig); err != nil {
			return err
		}
		abs, _ := filepath.Abs(kubeconfig)
		kubectl := "kubectl"
		if o.Kubectl != "" {
			kubectl, _ = filepath.Abs(o.Kubectl)
		}
		d.say("KEEP=1: the cluster stays up. In another terminal: export KUBECONFIG=%s; %s get nodes,pods -A (%s logs works for pods on the overflow node too). Ctrl-C stops everything.", abs, kubectl, kubectl)
		d.flush()
		<-ctx.Done()
		d.say("stopping")
	}
	d.flush()
	return nil
}

// loop samples the cluster twice a second and draws it.
func (d *demo) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		s := d.obs.take()
		d.mu.Lock()
		d.view.draw(s)
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// say adds a line to the story.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.view.log(time.Since(d.start), format, args...)
}

// flush prints the whole story once more after a live view, so it stays
// in the terminal's scrollback.
func (d *demo) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.view.tty {
		return
	}
	fmt.Fprintln(d.view.out)
	for _, l := range d.view.lines {
		fmt.Fprintln(d.view.out, l)
	}
	d.view.lines = nil
}

// step runs one numbered step of the story.
func (d *demo) step(ctx context.Context, name string, f func() error) error {
	n := len(d.result.steps) + 1
	title := fmt.Sprintf("%d/%d %s", n, storySteps, name)
	d.obs.setStep(title)
	d.say("== %s", title)
	begin := time.Since(d.start)
	err := f()
	d.result.steps = append(d.result.steps, stepResult{name: title, started: begin, took: time.Since(d.start) - begin})
	if err != nil {
		return fmt.Errorf("step %s: %w", title, err)
	}
	return ctx.Err()
}

// wait samples until cond holds, or fails after the step timeout naming
// what did not happen.
func (d *demo) wait(ctx context.Context, what string, cond func(sample) bool) error {
	deadline := time.Now().Add(d.opts.StepTimeout)
	for {
		if err := d.cluster.procsAlive(); err != nil {
			return err
		}
		s := d.obs.take()
		if cond(s) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not happen within %s (now: research %d GPUs, production %d physical + %d overflow, %d/%d production Ready)",
				what, d.opts.StepTimeout, s.research, s.production, s.overflow, s.productionReady, s.productionPods)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// procsAlive fails when a binary the demo started has exited.
func (c *cluster) procsAlive() error { return c.procs.Alive() }
