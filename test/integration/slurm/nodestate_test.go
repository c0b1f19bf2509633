// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/test/harness"
)

// TestDrainAndResume: an admin drains a node in Slurm; new pods stop going
// there within a poll interval, a pod that can only go there is told why in
// Slurm's own words, and when the node is resumed that pod is placed (it is
// requeued by the Slurm change, not by a timer).
func TestDrainAndResume(t *testing.T) { eachSlurm(t, testDrainAndResume) }

func testDrainAndResume(t *testing.T, env slurmEnv) {
	t.Cleanup(func() { env.resumeAll(t) })
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, nil)
	startScheduler(t, cp, env.slurmArgs(env.url, env.tokenFile))

	env.must(t, "scontrol", "update", "nodename=gpu03", "state=drain", "reason=sluice-e2e: GPU 3 ECC errors")
	env.waitState(t, "gpu03", "drain")
	waitSchedulerSees(t, cp, ns, "gpu03", 1, "FailedScheduling", "Slurm node gpu03 is IDLE+DRAIN")

	// Eight 8-GPU pods for eight nodes: seven bind, none on gpu03.
	var names []string
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("full-%d", i)
		harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(8).Obj())
		names = append(names, name)
	}
	var bound map[string]string
	var pending string
	harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		bound, pending = map[string]string{}, ""
		for _, n := range names {
			p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				bound[n] = p.Spec.NodeName
			} else {
				pending = n
			}
		}
		return len(bound) == 7, nil
	}, func() string { return fmt.Sprintf("want 7 of 8 pods bound, got %v", bound) })
	for pod, node := range bound {
		if node == "gpu03" {
			t.Fatalf("pod %s was bound to the drained gpu03", pod)
		}
	}
	// The pending pod's event says why gpu03 is out, in Slurm's words.
	harness.WaitForEvent(t, cp.Client, ns, "Pod", pending, "FailedScheduling", "Slurm node gpu03 is IDLE+DRAIN", "sluice-e2e: GPU 3 ECC errors")

	env.must(t, "scontrol", "update", "nodename=gpu03", "state=resume")
	if node := harness.WaitForPodsBound(t, cp.Client, ns, pending)[pending]; node != "gpu03" {
		t.Fatalf("after resume, %s went to %s, want gpu03", pending, node)
	}
}

// TestSharedNodeGPUsHeldBySlurm: on a node where slurmd runs beside
// kubelet, a Slurm job holding 6 of 8 GPUs leaves 2 for pods: a 4-GPU pod
// does not go there, a 2-GPU pod may.
func TestSharedNodeGPUsHeldBySlurm(t *testing.T) { eachSlurm(t, testSharedNodeGPUsHeldBySlurm) }

func testSharedNodeGPUsHeldBySlurm(t *testing.T, env slurmEnv) {
	t.Cleanup(func() { env.resumeAll(t) })
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, map[string]string{"sluice.dev/slurm-shared": "true"})
	startScheduler(t, cp, env.slurmArgs(env.url, env.tokenFile))

	env.must(t, "sbatch", "-Q", "-w", "gpu05", "--gres=gpu:6", "-c", "2", "-o", "/dev/null", "--wrap", "sleep 600")
	env.waitState(t, "gpu05", "mixed")
	waitSchedulerSees(t, cp, ns, "gpu05", 4, "FailedScheduling", "Slurm jobs hold 6 of 8 nvidia.com/gpu on gpu05")

	four := harness.Pod(ns, "four").GPUs(4).Obj()
	four.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu05"}
	two := harness.Pod(ns, "two").GPUs(2).Obj()
	two.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu05"}
	harness.ExpectNeverBound(t, cp.Client, ns, "four")
	harness.CreatePods(t, cp.Client, four)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "four", "FailedScheduling", "Slurm jobs hold 6 of 8 nvidia.com/gpu on gpu05")
	// The 2 GPUs Slurm leaves are for pods ("four" stays pending: the
	// watch above fails the test if it is ever bound).
	harness.CreatePods(t, cp.Client, two)
	harness.WaitForPodsBound(t, cp.Client, ns, "two")
}

// TestSlurmrestdDown: with slurmrestd killed, the last good snapshot is
// used (a drained node stays out, the others are used); after maxStaleness
// Slurm-managed nodes fail closed, with the reason in the pod's event; when
// slurmrestd is back, the waiting pod is placed.
func TestSlurmrestdDown(t *testing.T) { eachSlurm(t, testSlurmrestdDown) }

func testSlurmrestdDown(t *testing.T, env slurmEnv) {
	t.Cleanup(func() {
		restartRestd(t, env)
		env.resumeAll(t)
	})
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, nil)
	startScheduler(t, cp, env.slurmArgs(env.url, env.tokenFile))

	env.must(t, "scontrol", "update", "nodename=gpu02", "state=drain", "reason=sluice-e2e: stale test")
	env.waitState(t, "gpu02", "drain")
	waitSchedulerSees(t, cp, ns, "gpu02", 1, "FailedScheduling", "Slurm node gpu02 is IDLE+DRAIN")
	killRestd(t, env)
	killed := time.Now()

	// Within maxStaleness: the stale snapshot still keeps gpu02 out, and
	// the other nodes are used.
	pinned := harness.Pod(ns, "pinned").GPUs(1).Obj()
	pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu02"}
	harness.CreatePods(t, cp.Client, pinned, harness.Pod(ns, "early").GPUs(1).Obj())
	harness.WaitForPodsBound(t, cp.Client, ns, "early")
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "pinned", "FailedScheduling", "Slurm node gpu02 is IDLE+DRAIN")
	if since := time.Since(killed); since >= maxStaleness*time.Second {
		t.Fatalf("the within-staleness checks took %s, longer than maxStaleness (%ds): they proved nothing", since, maxStaleness)
	}

	// After maxStaleness: fail closed. SlurmNodeState retries the pods it
	// rejected when its state turns stale, so the pinned pod is told.
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "pinned", "FailedScheduling", "SlurmStateStale: failing closed", "last poll: slurmrestd GET")
	stillClosed := harness.ExpectNeverBound(t, cp.Client, ns, "late")
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "late").GPUs(1).Obj())
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "late", "FailedScheduling", "SlurmStateStale: failing closed", "last poll: slurmrestd GET")

	stillClosed()
	restartRestd(t, env)
	harness.WaitForPodsBound(t, cp.Client, ns, "late")
}

// TestWrongToken: a token slurmrestd rejects is a clear error in the
// events of the pods it keeps waiting (failing closed), not a crash; the
// scheduler keeps running and serves other nodes.
func TestWrongToken(t *testing.T) { eachSlurm(t, testWrongToken) }

func testWrongToken(t *testing.T, env slurmEnv) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, nil)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("not-slurm", 8).Obj())
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("not-a-jwt"), 0o600); err != nil {
		t.Fatal(err)
	}
	startScheduler(t, cp, env.slurmArgs(env.url, bad))
	pinned := harness.Pod(ns, "pinned").GPUs(1).Obj()
	pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu01"}
	harness.CreatePods(t, cp.Client, pinned, harness.Pod(ns, "free").GPUs(1).Obj())
	msg := harness.WaitForEvent(t, cp.Client, ns, "Pod", "pinned", "FailedScheduling", "SlurmStateStale", "no snapshot of Slurm's node state yet", "check the token file")
	t.Logf("event: %s", msg)
	if node := harness.WaitForPodsBound(t, cp.Client, ns, "free")["free"]; node != "not-slurm" {
		t.Errorf("free pod on %s, want not-slurm (the only node not failing closed)", node)
	}
}

// TestUnixSocket reads Slurm's state over slurmrestd's unix socket (local
// auth, no token).
func TestUnixSocket(t *testing.T) { eachSlurm(t, testUnixSocket) }

func testUnixSocket(t *testing.T, env slurmEnv) {
	t.Cleanup(func() { env.resumeAll(t) })
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, nil)
	args := env.slurmArgs("unix://"+env.socket, "")
	startScheduler(t, cp, args)
	env.must(t, "scontrol", "update", "nodename=gpu07", "state=down", "reason=sluice-e2e: socket test")
	env.waitState(t, "gpu07", "down")
	waitSchedulerSees(t, cp, ns, "gpu07", 1, "FailedScheduling", "Slurm node gpu07 is DOWN", "socket test")
}

// killRestd stops slurmrestd (TCP) and waits until it is gone.
func killRestd(t *testing.T, env slurmEnv) { env.kill(t, "slurmrestd") }

// kill stops a daemon of the test Slurm by its pid file and waits until it
// is gone.
func (e slurmEnv) kill(t *testing.T, daemon string) {
	t.Helper()
	pid := e.pid(t, daemon)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("killing %s: %v", daemon, err)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return err != nil || strings.TrimSpace(string(comm)) != daemon || zombie(pid), nil
	}, func() string { return fmt.Sprintf("%s (pid %d) still runs", daemon, pid) })
}

// zombie reports whether a process has exited and waits for its parent.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// restartRestd starts whatever of the test Slurm is not running (its up
// script is idempotent).
func restartRestd(t *testing.T, env slurmEnv) { env.bringUp(t) }

// bringUp runs the up script (which starts what is not running) with
// extra environment (e.g. SLURMCTLD_FAKETIME=-30s).
func (e slurmEnv) bringUp(t *testing.T, extra ...string) {
	t.Helper()
	cmd := exec.Command("bash", e.up)
	cmd.Env = append(os.Environ(), extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", e.up, extra, err, out)
	}
}
