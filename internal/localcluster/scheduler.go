// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package localcluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/sluice-sched/sluice/pkg/registry"
)

// Scheduler is a sluice-scheduler running in this process.
type Scheduler struct {
	// Runtime is the scheduler's sluice runtime, for tests that wait on
	// what it exposes (its Slurm view, say).
	Runtime *registry.Runtime
	sched   *scheduler.Scheduler
	cancel  context.CancelFunc
	done    chan struct{}
}

// RunScheduler starts sluice-scheduler from a configuration file as the
// binary would (kube-scheduler's app.Setup: strict decoding, validation,
// sluice's registry), minus what a process must not do more than once
// (configz and /healthz registration) and leader election.
func RunScheduler(ctx context.Context, configFile string) (*Scheduler, error) {
	ctx, cancel := context.WithCancel(ctx)
	opts := options.NewOptions()
	opts.ConfigFile = configFile
	// No secure serving: callers reach the scheduler only through the
	// apiserver, and a fixed port would clash between schedulers.
	opts.SecureServing.BindPort = 0
	rt := registry.New()
	cc, sched, err := app.Setup(ctx, opts, rt.Options()...)
	if err != nil {
		cancel()
		return nil, err
	}
	if cc.LeaderElection != nil {
		cancel()
		return nil, fmt.Errorf("in-process schedulers run without leader election; set leaderElection.leaderElect: false")
	}
	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	cc.DynInformerFactory.Start(ctx.Done())
	// Informers that cannot list (e.g. RBAC forbids it) never sync; bound
	// the wait so such a start-up fails instead of hanging.
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	for typ, ok := range cc.InformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("scheduler informer for %v did not sync within 30s", typ)
		}
	}
	for typ, ok := range cc.DynInformerFactory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			cancel()
			return nil, fmt.Errorf("scheduler informer for %v did not sync within 30s", typ)
		}
	}
	if err := sched.WaitForHandlersSync(syncCtx); err != nil {
		cancel()
		return nil, fmt.Errorf("scheduler handlers did not sync: %w", err)
	}
	rt.Attach(cc)
	s := &Scheduler{Runtime: rt, sched: sched, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cc.EventBroadcaster.Shutdown()
		sched.Run(ctx)
		klog.FromContext(ctx).V(2).Info("harness scheduler stopped")
	}()
	return s, nil
}

// Stop stops the scheduler and waits until it has returned.
func (s *Scheduler) Stop() {
	s.cancel()
	<-s.done
}

// Filters are the Filter plugins of a profile, in the order the scheduler
// runs them (nil for a profile it does not have).
func (s *Scheduler) Filters(profile string) []string {
	fw, ok := s.sched.Profiles[profile]
	if !ok {
		return nil
	}
	var names []string
	for _, p := range fw.ListPlugins().Filter.Enabled {
		names = append(names, p.Name)
	}
	return names
}
