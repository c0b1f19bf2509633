// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/sluice-sched/sluice/pkg/metrics"
	"github.com/sluice-sched/sluice/pkg/slurm"
	"github.com/sluice-sched/sluice/test/harness"
)

// skew is how far behind the scheduler's clock slurmctld's runs here.
const skew = 30 * time.Second

// TestDrainSeenWithSlurmctldBehind: slurmctld's clock runs 30 s behind the
// scheduler's (libfaketime, hack/slurm-up.sh's SLURMCTLD_FAKETIME). A drain
// shows at the first poll after it: in sluice's poller driven by hand (one
// poll, counted exactly) and in the real scheduler before its first full
// refresh (every 30 polls). Asking for changes since the scheduler's clock
// missed it until that full refresh, while every poll succeeded.
func TestDrainSeenWithSlurmctldBehind(t *testing.T) {
	eachSlurm(t, testDrainSeenWithSlurmctldBehind)
}

func testDrainSeenWithSlurmctldBehind(t *testing.T, env slurmEnv) {
	env.restartCtld(t, "-30s")
	t.Cleanup(func() {
		env.restartCtld(t, "")
		env.resumeAll(t)
	})
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, nil)

	// Every poll, the scheduler's and this test's, is counted here.
	metrics.Register()
	polls := func() uint64 {
		n, err := testutil.GetHistogramMetricCount(metrics.SlurmPollDuration.ObserverMetric)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := polls()
	startScheduler(t, cp, env.slurmArgs(env.url, env.tokenFile))
	// The scheduler's first poll reads everything; the drain comes after
	// a changed-since poll.
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) { return polls() >= start+2, nil },
		func() string { return "the scheduler did not poll Slurm twice" })

	client, err := slurm.NewClient(slurm.ClientConfig{Endpoint: env.url, CAFile: env.caFile, User: env.user, TokenFile: env.tokenFile, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	poller := slurm.NewCache(client, slurm.CacheConfig{Interval: time.Hour, FullRefreshEvery: 1 << 20})
	ctx := context.Background()
	for range 2 { // everything, then what changed since
		if err := poller.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}

	env.must(t, "scontrol", "update", "nodename=gpu05", "state=drain", "reason=sluice-e2e: skewed clock")
	env.waitState(t, "gpu05", "drain")
	// slurmctld stamps the drain with its own clock: it really is behind.
	stamp := strings.TrimSpace(env.must(t, "sinfo", "-h", "-N", "-n", "gpu05", "-o", "%H"))
	at, err := time.ParseInLocation("2006-01-02T15:04:05", stamp, time.Local)
	if err != nil {
		t.Fatalf("the drain's time %q: %v", stamp, err)
	}
	if behind := time.Since(at); behind < skew-5*time.Second {
		t.Fatalf("slurmctld stamped the drain %s, %v before now: its clock is not %v behind (faketime not in effect)", stamp, behind.Round(time.Second), skew)
	}

	if err := poller.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _, _ := poller.Snapshot()
	if n := snap.Nodes["gpu05"]; n == nil || !n.Has("DRAIN") {
		t.Fatalf("one poll after the drain, sluice's snapshot has gpu05 as %v, want DRAIN", n)
	}

	waitSchedulerSees(t, cp, ns, "gpu05", 1, "FailedScheduling", "Slurm node gpu05 is IDLE+DRAIN")
	if n := polls() - start - 3; n >= 30 {
		t.Fatalf("the scheduler saw the drain after %d polls, at its full refresh (every 30), not at the poll after it", n)
	}
}

// restartCtld restarts slurmctld with its clock offset by faketime (e.g.
// "-30s"; "" for the real clock), its state kept, and waits until every
// node is registered again.
func (e slurmEnv) restartCtld(t *testing.T, offset string) {
	t.Helper()
	e.kill(t, "slurmctld")
	e.bringUp(t, "SLURMCTLD_FAKETIME="+offset, "SLURM_KEEP_STATE=1", "SLURM24_KEEP_STATE=1")
}
