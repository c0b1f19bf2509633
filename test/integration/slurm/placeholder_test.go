// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/pkg/slurmhold"
	"github.com/sluice-sched/sluice/test/harness"
)

// placeholderArgs turn placeholder jobs on, swept every second, submitted
// through slurmrestd (24.11) or sbatch (22.05, whose API cannot pin a job
// to a node).
func (e slurmEnv) placeholderArgs(t *testing.T) *configv1.SlurmConfig {
	args := e.writes(t, e.slurmArgs(e.url, e.tokenFile))
	args.Placeholders = &configv1.SlurmPlaceholderConfig{Enabled: ptr.To(os.Getenv("SLUICE_TEST_PLACEHOLDERS_OFF") == ""), TimeoutSeconds: ptr.To[int64](10), ResyncSeconds: ptr.To[int64](1)}
	return args
}

// placeholderScheduler gives a test its namespace, the Slurm nodes (shared
// with slurmd) and a scheduler with placeholder jobs on; Slurm is cleaned
// up after the test.
func (e slurmEnv) placeholderScheduler(t *testing.T) (*harness.ControlPlane, string) {
	t.Helper()
	t.Cleanup(func() { e.resumeAll(t) })
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, map[string]string{"sluice.dev/slurm-shared": "true"})
	startScheduler(t, cp, e.placeholderArgs(t))
	return cp, ns
}

// onNode is a pod that needs gpus GPUs and may only go to node.
func onNode(ns, name, node string, gpus int) *v1.Pod {
	p := harness.Pod(ns, name).GPUs(gpus).Obj()
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return p
}

// TestPlaceholderJobsHoldPodGPUs: on nodes shared with slurmd, a pod's GPUs
// are held in the real Slurm before it is bound. A Slurm job then waits for
// them; two 4-GPU pods share a node (the placeholders are not counted
// twice); the indices Slurm gave are on the pod; deleting the pod cancels
// its job and the waiting Slurm job runs; a placeholder cancelled behind
// sluice's back is reported on its pod.
func TestPlaceholderJobsHoldPodGPUs(t *testing.T) { eachSlurm(t, testPlaceholderJobsHoldPodGPUs) }

func testPlaceholderJobsHoldPodGPUs(t *testing.T, env slurmEnv) {
	cp, ns := env.placeholderScheduler(t)

	// An 8-GPU pod on gpu03: bound with a running placeholder job, whose
	// GPU indices are on the pod.
	harness.CreatePods(t, cp.Client, onNode(ns, "eight", "gpu03", 8))
	harness.WaitForPodsBound(t, cp.Client, ns, "eight")
	eight := getPod(t, cp, ns, "eight")
	job := eight.Annotations[slurmhold.AnnotationJob]
	if job == "" || eight.Annotations[slurmhold.AnnotationNode] != "gpu03" {
		t.Fatalf("pod eight bound without a placeholder job: annotations %v", eight.Annotations)
	}
	show := env.must(t, "scontrol", "-d", "-o", "show", "job", job)
	for _, want := range []string{"JobName=sluice-" + string(eight.UID), "JobState=RUNNING", "NodeList=gpu03", "GRES=gpu:8(IDX:" + eight.Annotations[slurmhold.AnnotationGPUs] + ")"} {
		if !strings.Contains(show, want) {
			t.Fatalf("placeholder job %s lacks %q: %s", job, want, show)
		}
	}
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "eight", slurmhold.ReasonHeld, "Slurm job "+job+" holds 8 GPUs")

	// A Slurm job for gpu03's 8 GPUs waits: Slurm sees them used.
	waiting := strings.TrimSpace(env.must(t, "sbatch", "--parsable", "-w", "gpu03", "--gres=gpu:8", "-o", "/dev/null", "--wrap", "sleep 600"))
	state := env.waitJob(t, waiting, func(st, reason string) bool { return st != "PENDING" || reason != "None" })
	if state != "PENDING Resources" {
		t.Fatalf("Slurm job %s for gpu03's 8 GPUs is %q, want PENDING Resources (the pod holds them)", waiting, state)
	}

	// Two 4-GPU pods share gpu04: each one's placeholder is its own
	// request, not Slurm's on top of it.
	harness.CreatePods(t, cp.Client, onNode(ns, "four-a", "gpu04", 4))
	harness.WaitForPodsBound(t, cp.Client, ns, "four-a")
	harness.CreatePods(t, cp.Client, onNode(ns, "four-b", "gpu04", 4))
	harness.WaitForPodsBound(t, cp.Client, ns, "four-b")
	a, b := getPod(t, cp, ns, "four-a"), getPod(t, cp, ns, "four-b")
	if ia, ib := a.Annotations[slurmhold.AnnotationGPUs], b.Annotations[slurmhold.AnnotationGPUs]; !(ia == "0-3" && ib == "4-7") && !(ia == "4-7" && ib == "0-3") {
		t.Fatalf("the two pods on gpu04 hold GPU indices %q and %q, want 0-3 and 4-7 (disjoint, together the node's 8)", ia, ib)
	}

	// Deleting the pod cancels its job; the Slurm job that waited runs.
	deletePod(t, cp, ns, "eight")
	if st := env.waitJob(t, job, ended); !strings.HasPrefix(st, "CANCELLED") && st != "gone" {
		t.Fatalf("placeholder job %s of the deleted pod is %q, want CANCELLED", job, st)
	}
	if st := env.waitJob(t, waiting, func(st, _ string) bool { return st != "PENDING" }); !strings.HasPrefix(st, "RUNNING") {
		t.Fatalf("Slurm job %s is %q once the pod is gone, want RUNNING", waiting, st)
	}

	// A placeholder cancelled behind sluice's back: its pod is reported.
	env.must(t, "scancel", a.Annotations[slurmhold.AnnotationJob])
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "four-a", slurmhold.ReasonLost, "Slurm job "+a.Annotations[slurmhold.AnnotationJob])
}

// TestPlaceholderRefusedWhileSlurmIsDown: when Slurm cannot take the
// placeholder job while the pod binds, the pod is not bound there and its
// FailedScheduling Event says why; the last good snapshot keeps the node
// usable in Filter meanwhile. On 24.11 the write path that goes down is
// slurmrestd (killed). Slurm 22.05 takes placeholder jobs through sbatch,
// so there it is slurmctld (stopped with SIGSTOP: its RPCs hang until the
// request timeout), and a job slurmctld takes late, once it runs again, is
// cancelled by the sweep.
func TestPlaceholderRefusedWhileSlurmIsDown(t *testing.T) {
	eachSlurm(t, testPlaceholderRefusedWhileSlurmIsDown)
}

func testPlaceholderRefusedWhileSlurmIsDown(t *testing.T, env slurmEnv) {
	cp, ns := env.placeholderScheduler(t)
	// One pod placed with its placeholder: the scheduler reads Slurm.
	harness.CreatePods(t, cp.Client, onNode(ns, "first", "gpu08", 1))
	harness.WaitForPodsBound(t, cp.Client, ns, "first")

	down, up := env.stopWritePath(t)
	t.Cleanup(up)
	harness.ExpectNeverBound(t, cp.Client, ns, "refused")
	harness.CreatePods(t, cp.Client, onNode(ns, "refused", "gpu06", 2))
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "refused", "FailedScheduling", slurmhold.ReasonRefused, down, "gpu06")
	up()
	// Whatever slurmctld took late is cancelled: no job of the pod runs.
	pod := getPod(t, cp, ns, "refused")
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return !strings.Contains(env.must(t, "squeue", "--noheader", "--format=%j %T"), "sluice-"+string(pod.UID)), nil
	}, func() string {
		return "a placeholder job of the refused pod is still queued or running: " + env.must(t, "squeue")
	})
}

// TestOrphanPlaceholderCancelled: a placeholder whose pod is deleted while
// no scheduler runs (the real scheduler process killed) is cancelled by
// the next scheduler's sweep.
func TestOrphanPlaceholderCancelled(t *testing.T) { eachSlurm(t, testOrphanPlaceholderCancelled) }

func testOrphanPlaceholderCancelled(t *testing.T, env slurmEnv) {
	t.Cleanup(func() { env.resumeAll(t) })
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	slurmNodes(t, cp, map[string]string{"sluice.dev/slurm-shared": "true"})
	cfg := harness.LoadShippedConfig(t)
	harness.SetPluginArgs(t, cfg, "sluice-research", "SlurmNodeState", &configv1.SlurmNodeStateArgs{Slurm: env.placeholderArgs(t)})
	le := harness.LeaderElection{Namespace: ns, Lease: "sluice-scheduler"}

	first := harness.StartSchedulerProcess(t, cp, cfg, "scheduler-a", le)
	harness.CreatePods(t, cp.Client, onNode(ns, "held", "gpu07", 4))
	harness.WaitForPodsBound(t, cp.Client, ns, "held")
	job := getPod(t, cp, ns, "held").Annotations[slurmhold.AnnotationJob]
	if job == "" {
		t.Fatal("pod held bound without a placeholder job")
	}
	first.Kill()
	<-first.Exited()
	deletePod(t, cp, ns, "held")
	if st := env.jobState(t, job); st != "RUNNING None" {
		t.Fatalf("placeholder job %s is %q with no scheduler running, want RUNNING", job, st)
	}

	harness.StartSchedulerProcess(t, cp, cfg, "scheduler-b", le)
	if st := env.waitJob(t, job, ended); !strings.HasPrefix(st, "CANCELLED") && st != "gone" {
		t.Fatalf("orphan placeholder job %s is %q, want CANCELLED by the new leader's sweep", job, st)
	}
}

// TestSweepTouchesOnlyItsOwnJobs: the sweep decides from Slurm which job
// holds which pod's GPUs, and touches only jobs this sluice submitted. A
// bound pod whose tenant rewrote its sluice.dev/slurm-* annotations keeps
// its placeholder (Slurm would double-book its GPUs), and a job named like
// a placeholder of a pod that does not exist, but not carrying this
// cluster's id, is never cancelled. A job of this cluster's that no bound
// pod claims is cancelled after the grace period: the witness that the
// sweep ran past it for the others.
func TestSweepTouchesOnlyItsOwnJobs(t *testing.T) { eachSlurm(t, testSweepTouchesOnlyItsOwnJobs) }

func testSweepTouchesOnlyItsOwnJobs(t *testing.T, env slurmEnv) {
	cp, ns := env.placeholderScheduler(t)
	ctx := context.Background()
	harness.CreatePods(t, cp.Client, onNode(ns, "held", "gpu05", 4))
	harness.WaitForPodsBound(t, cp.Client, ns, "held")
	held := getPod(t, cp, ns, "held")
	job := held.Annotations[slurmhold.AnnotationJob]
	if job == "" {
		t.Fatal("pod held bound without a placeholder job")
	}
	tamper := fmt.Sprintf(`{"metadata":{"annotations":{%q:"1",%q:"elsewhere"}}}`, slurmhold.AnnotationJob, slurmhold.AnnotationNode)
	if _, err := cp.Client.CoreV1().Pods(ns).Patch(ctx, "held", types.MergePatchType, []byte(tamper), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	submit := func(name, comment string) string {
		id := strings.TrimSpace(env.must(t, "sbatch", "--parsable", "-J", name, "--comment", comment, "-w", "gpu08", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 600"))
		t.Cleanup(func() { _, _ = env.run("scancel", id) })
		if st := env.waitJob(t, id, func(st, _ string) bool { return st != "PENDING" }); !strings.HasPrefix(st, "RUNNING") {
			t.Fatalf("Slurm job %s (%s) is %q, want it RUNNING", id, name, st)
		}
		return id
	}
	foreign := submit(slurmhold.JobPrefix+"0f3c6a4e-0000-4000-8000-000000000000", "a user's own job")
	system, err := cp.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The witness: this cluster's, for a pod that exists but is bound
	// nowhere (no node has its label).
	unbound := harness.Pod(ns, "unbound").Obj()
	unbound.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "no-such-node"}
	harness.CreatePods(t, cp.Client, unbound)
	// Another Slurm user's job with this cluster's name and comment: its
	// user is not sluice's, so it is never sluice's to cancel.
	otherUser := strings.TrimSpace(env.asNobody(t, "sbatch", "--parsable", "-J", slurmhold.JobPrefix+string(getPod(t, cp, ns, "unbound").UID),
		"--comment", slurmhold.OwnerPrefix+string(system.UID)+": another user's", "-w", "gpu08", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 600"))
	t.Cleanup(func() { _, _ = env.run("scancel", otherUser) })
	if st := env.waitJob(t, otherUser, func(st, _ string) bool { return st != "PENDING" }); !strings.HasPrefix(st, "RUNNING") {
		t.Fatalf("Slurm job %s (user nobody) is %q, want it RUNNING", otherUser, st)
	}
	witness := submit(slurmhold.JobPrefix+string(getPod(t, cp, ns, "unbound").UID), slurmhold.OwnerPrefix+string(system.UID)+": witness")
	cancelled := func(st, _ string) bool { return strings.HasPrefix(st, "CANCELLED") }
	if st := env.waitJob(t, witness, cancelled); !strings.HasPrefix(st, "CANCELLED") && st != "gone" {
		t.Fatalf("this cluster's placeholder job %s that no bound pod claims is %q, want CANCELLED after the grace period", witness, st)
	}
	if st := env.jobState(t, job); !strings.HasPrefix(st, "RUNNING") {
		t.Errorf("the placeholder job %s of a bound pod whose annotations were rewritten is %q, want RUNNING", job, st)
	}
	if st := env.jobState(t, foreign); st != "RUNNING None" {
		t.Errorf("a job named like a placeholder but not this cluster's is %q, want RUNNING (never cancelled)", st)
	}
	if st := env.jobState(t, otherUser); st != "RUNNING None" {
		t.Errorf("another Slurm user's job with this cluster's name and comment is %q, want RUNNING (never cancelled)", st)
	}
}

// asNobody runs a Slurm command as the user nobody, not as the root the
// tests and sluice run as: for 22.05 with runuser, for 24.11 in its chroot
// (the client wrapper's, entered as nobody).
func (e slurmEnv) asNobody(t *testing.T, name string, args ...string) string {
	t.Helper()
	var cmd *exec.Cmd
	if e.bin == "" {
		cmd = exec.Command("runuser", append([]string{"-u", "nobody", "--", name}, args...)...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+e.conf)
	} else {
		wrapper, err := os.ReadFile(filepath.Join(e.bin, name))
		if err != nil {
			t.Fatal(err)
		}
		root := regexp.MustCompile(`chroot (\S+) `).FindSubmatch(wrapper)
		conf := regexp.MustCompile(`SLURM_CONF=(\S+)`).FindSubmatch(wrapper)
		if root == nil || conf == nil {
			t.Fatalf("%s: no chroot or SLURM_CONF in the wrapper hack/slurm24-up.sh wrote", filepath.Join(e.bin, name))
		}
		cmd = exec.Command("chroot", append([]string{"--userspec=65534:65534", string(root[1]), "/usr/bin/" + name}, args...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "SLURM_CONF=" + string(conf[1])}
	}
	cmd.Dir = "/tmp"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s as nobody: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stopWritePath takes down the way sluice writes to this Slurm: slurmrestd
// (killed) where it writes through it, slurmctld (SIGSTOP) where it runs
// sbatch. It returns what the refusal names (the request, or the command)
// and what brings the path back (safe to call twice).
func (e slurmEnv) stopWritePath(t *testing.T) (string, func()) {
	t.Helper()
	if e.restWrites {
		killRestd(t, e)
		return "POST /slurm/", func() { restartRestd(t, e) }
	}
	ctld := e.pid(t, "slurmctld")
	if err := syscall.Kill(ctld, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return "sbatch", func() {
		if err := syscall.Kill(ctld, syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}
}

// ended: a job is neither running nor completing (a cancelled job
// completes first).
func ended(state, _ string) bool { return state != "RUNNING" && state != "COMPLETING" }

// jobState is "STATE REASON" of a Slurm job, or "gone".
func (e slurmEnv) jobState(t *testing.T, id string) string {
	t.Helper()
	out, err := e.run("scontrol", "-o", "show", "job", id)
	if err != nil {
		if strings.Contains(out, "Invalid job id") {
			return "gone"
		}
		t.Fatalf("scontrol show job %s: %v: %s", id, err, out)
	}
	var state, reason string
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			state = v
		}
		if v, ok := strings.CutPrefix(f, "Reason="); ok {
			reason = v
		}
	}
	return state + " " + reason
}

// waitJob waits until done(state, reason) holds for a Slurm job and returns
// its "STATE REASON" ("gone" once Slurm forgot it).
func (e slurmEnv) waitJob(t *testing.T, id string, done func(state, reason string) bool) string {
	t.Helper()
	var last string
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		last = e.jobState(t, id)
		if last == "gone" {
			return true, nil
		}
		st, reason, _ := strings.Cut(last, " ")
		return done(st, reason), nil
	}, func() string { return fmt.Sprintf("Slurm job %s is %q", id, last) })
	return last
}

// pid reads a Slurm daemon's pid file.
func (e slurmEnv) pid(t *testing.T, daemon string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.dir, "pids", daemon+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(data)), &pid); err != nil {
		t.Fatalf("pid file of %s: %v", daemon, err)
	}
	return pid
}

func getPod(t *testing.T, cp *harness.ControlPlane, ns, name string) *v1.Pod {
	t.Helper()
	p, err := cp.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deletePod deletes a pod at once (no kubelet runs it).
func deletePod(t *testing.T, cp *harness.ControlPlane, ns, name string) {
	t.Helper()
	if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}
