// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/slurmdrain"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestKubernetesDrainsSlurm: Kubernetes taking a node away drains it in
// the real Slurm, with sluice's reason, and giving it back resumes it:
// cordon and uncordon, NotReady and Ready again. An admin's drain is never
// undone, cordoned or not. Slurm 22.05's API cannot update nodes, so there
// the scheduler writes through scontrol (slurm.commands); on 24.11 through
// slurmrestd.
func TestKubernetesDrainsSlurm(t *testing.T) { eachSlurm(t, testKubernetesDrainsSlurm) }

func testKubernetesDrainsSlurm(t *testing.T, env slurmEnv) {
	t.Cleanup(func() { env.resumeAll(t) })
	cp := harness.Shared(t)
	slurmNodes(t, cp, nil)
	// The Events sluice records on Nodes are in "default": gone with the
	// test, like its nodes.
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Events("default").DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	})
	args := env.writes(t, env.slurmArgs(env.url, env.tokenFile))
	args.Drain = &configv1.SlurmDrainConfig{Enabled: ptr.To(true)}
	startScheduler(t, cp, args)

	// Cordon: drained with sluice's reason; uncordon: resumed.
	setUnschedulable(t, cp, "gpu02", true)
	env.waitReason(t, "gpu02", "drain", "sluice: cordoned in Kubernetes")
	harness.WaitForEvent(t, cp.Client, "default", "Node", "gpu02", slurmdrain.ReasonDrained, "sluice: cordoned in Kubernetes")
	setUnschedulable(t, cp, "gpu02", false)
	env.waitResumed(t, "gpu02")

	// NotReady: drained; Ready again: resumed.
	setReady(t, cp, "gpu04", v1.ConditionUnknown)
	env.waitReason(t, "gpu04", "drain", "sluice: NotReady in Kubernetes")
	setReady(t, cp, "gpu04", v1.ConditionTrue)
	env.waitResumed(t, "gpu04")

	// An admin's drain: a cordon does not replace its reason, an uncordon
	// does not resume it.
	env.must(t, "scontrol", "update", "nodename=gpu06", "state=drain", "reason=admin: bad HCA")
	env.waitState(t, "gpu06", "drain")
	setUnschedulable(t, cp, "gpu06", true)
	// Sluice acts on gpu07 after gpu06 (one worker, in event order): once
	// gpu07 is drained, gpu06 was judged on the same snapshot and left.
	setUnschedulable(t, cp, "gpu07", true)
	env.waitReason(t, "gpu07", "drain", "sluice: cordoned in Kubernetes")
	setUnschedulable(t, cp, "gpu06", false)
	setUnschedulable(t, cp, "gpu07", false)
	env.waitResumed(t, "gpu07")
	if st, reason := env.nodeState(t, "gpu06"), env.reason(t, "gpu06"); !strings.Contains(st, "drain") || reason != "admin: bad HCA" {
		t.Fatalf("gpu06 is %q with reason %q after cordon and uncordon, want the admin's drain untouched", st, reason)
	}
}

// commands is a directory of Slurm's commands for the scheduler that
// reach the test Slurm (its slurm.conf is not the host's default).
func (e slurmEnv) commands(t testing.TB) string {
	t.Helper()
	if e.bin != "" {
		return e.bin
	}
	dir := t.TempDir()
	for _, cmd := range []string{"scontrol", "sbatch", "squeue", "scancel"} {
		script := fmt.Sprintf("#!/bin/sh\nSLURM_CONF=%q exec %s \"$@\"\n", e.conf, cmd)
		if err := os.WriteFile(filepath.Join(dir, cmd), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// reason is the Slurm node's reason, as sinfo shows it.
func (e slurmEnv) reason(t *testing.T, node string) string {
	t.Helper()
	return strings.TrimSpace(e.must(t, "sinfo", "-h", "-N", "-n", node, "-o", "%E"))
}

// waitReason waits until a node's state contains state and its reason is
// reason.
func (e slurmEnv) waitReason(t *testing.T, node, state, reason string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(e.nodeState(t, node), state) && e.reason(t, node) == reason, nil
	}, func() string {
		return fmt.Sprintf("Slurm node %s is %q with reason %q, want %q with reason %q", node, e.nodeState(t, node), e.reason(t, node), state, reason)
	})
}

// waitResumed waits until a node is no longer drained (right after a
// resume Slurm shows it idle* for a moment).
func (e slurmEnv) waitResumed(t *testing.T, node string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		st := e.nodeState(t, node)
		return strings.HasPrefix(st, "idle") && !strings.Contains(st, "drain"), nil
	}, func() string {
		return fmt.Sprintf("Slurm node %s is %q, want it resumed (idle)", node, e.nodeState(t, node))
	})
}

func setUnschedulable(t *testing.T, cp *harness.ControlPlane, node string, on bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := cp.Client.CoreV1().Nodes().Patch(context.Background(), node, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setReady(t *testing.T, cp *harness.ControlPlane, node string, status v1.ConditionStatus) {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			n.Status.Conditions[i].Status = status
		}
	}
	if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
