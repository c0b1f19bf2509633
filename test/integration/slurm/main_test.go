// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package slurm tests SlurmNodeState against a real Slurm (slurmctld, 8
// slurmd, slurmrestd) started by hack/slurm-up.sh, and a real apiserver.
// .ci/run brings Slurm up before `make test`; without it these tests fail.
package slurm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.WithCRDs("manifests/crds/scheduling.x-k8s.io_podgroups.yaml"))
}

// slurmEnv is what hack/slurm-up.sh wrote to $SLURM_CI_DIR/slurm.env.
type slurmEnv struct {
	dir       string
	conf      string
	url       string
	socket    string
	user      string
	tokenFile string
	topology  string
}

// liveSlurm reads the environment of the running test Slurm and checks
// that it answers; a missing Slurm fails the test (never a skip).
func liveSlurm(t testing.TB) slurmEnv {
	t.Helper()
	dir := os.Getenv("SLURM_CI_DIR")
	if dir == "" {
		dir = "/tmp/slurm-ci"
	}
	f, err := os.Open(filepath.Join(dir, "slurm.env"))
	if err != nil {
		t.Fatalf("no running test Slurm (%v): run hack/slurm-up.sh first (.ci/run does)", err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = v
		}
	}
	env := slurmEnv{dir: dir, conf: vars["SLURM_CONF"], url: vars["SLURMRESTD_URL"], socket: vars["SLURMRESTD_SOCKET"],
		user: vars["SLURMRESTD_USER"], tokenFile: vars["SLURMRESTD_TOKEN_FILE"], topology: vars["SLURM_TOPOLOGY_CONF"]}
	if env.url == "" || env.tokenFile == "" {
		t.Fatalf("%s/slurm.env lacks SLURMRESTD_URL or SLURMRESTD_TOKEN_FILE; re-run hack/slurm-up.sh", dir)
	}
	if out, err := env.run("scontrol", "ping"); err != nil || !strings.Contains(out, "UP") {
		t.Fatalf("test Slurm is not answering (scontrol ping: %q, %v): run hack/slurm-up.sh", out, err)
	}
	return env
}

// run runs a Slurm command against the test cluster.
func (e slurmEnv) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs a Slurm command and fails the test if it fails.
func (e slurmEnv) must(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := e.run(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// nodeState is sinfo's state of a node, e.g. "idle", "drained", "mixed".
func (e slurmEnv) nodeState(t testing.TB, node string) string {
	t.Helper()
	return strings.TrimSpace(e.must(t, "sinfo", "-h", "-N", "-n", node, "-o", "%T"))
}

// resumeAll undoes what tests did to the cluster: jobs cancelled, nodes
// resumed.
func (e slurmEnv) resumeAll(t testing.TB) {
	t.Helper()
	_, _ = e.run("scancel", "--full", "--user=root")
	for i := 1; i <= 8; i++ {
		node := fmt.Sprintf("gpu%02d", i)
		if st := e.nodeState(t, node); strings.Contains(st, "drain") || strings.Contains(st, "down") || strings.Contains(st, "fail") {
			_, _ = e.run("scontrol", "update", "nodename="+node, "state=resume")
		}
	}
}

// maxStaleness is how long the tests trust a snapshot: long against a
// poll every second (a slow machine never makes a healthy Slurm look
// stale), short enough that waiting for it once is cheap.
const maxStaleness = 15

// slurmArgs are SlurmNodeState's args for the live cluster: poll every
// second, trust a snapshot for maxStaleness seconds.
func (e slurmEnv) slurmArgs(endpoint, tokenFile string) *configv1.SlurmConfig {
	return &configv1.SlurmConfig{
		Endpoint:              ptr.To(endpoint),
		User:                  ptr.To(e.user),
		TokenFile:             ptr.To(tokenFile),
		PollIntervalSeconds:   ptr.To[int64](1),
		RequestTimeoutSeconds: ptr.To[int64](2),
		MaxStalenessSeconds:   ptr.To[int64](maxStaleness),
		ManagedNodeLabel:      ptr.To("sluice.dev/slurm-managed"),
	}
}

// waitSchedulerSees waits until the scheduler's Slurm snapshot shows what
// the test did to a node: a probe pod that may only go to that node (and
// needs gpus GPUs) gets a FailedScheduling event containing every string
// of want. A probe placed before the snapshot caught up is bound; it is
// deleted and another probe tries. The last probe is deleted before this
// returns, so it takes nothing from the test.
func waitSchedulerSees(t *testing.T, cp *harness.ControlPlane, ns, node string, gpus int, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(harness.DefaultTimeout)
	for attempt := 0; ; attempt++ {
		name := fmt.Sprintf("probe-%s-%d", node, attempt)
		probe := harness.Pod(ns, name).GPUs(gpus).Obj()
		probe.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		harness.CreatePods(t, cp.Client, probe)
		var seen string
		harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
			p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				seen = "bound"
				return true, nil
			}
			for _, e := range harness.PodEvents(t, cp.Client, ns, name) {
				if containsAll(e, want) {
					seen = e
					return true, nil
				}
			}
			return false, nil
		}, func() string {
			return fmt.Sprintf("probe %s: no FailedScheduling event with %q; events %q", name, want, harness.PodEvents(t, cp.Client, ns, name))
		})
		if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		harness.WaitForPodsGone(t, cp.Client, ns, name)
		if seen != "bound" {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler kept placing probes on %s for %v (%d probes); want %q", node, harness.DefaultTimeout, attempt+1, want)
		}
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// startScheduler runs the shipped configuration with the Slurm connection
// (stated once, in the research profile's SlurmNodeState, as shipped)
// pointed at the live Slurm; both profiles read it.
func startScheduler(t *testing.T, cp *harness.ControlPlane, slurm *configv1.SlurmConfig) {
	t.Helper()
	cfg := harness.LoadShippedConfig(t)
	harness.SetPluginArgs(t, cfg, "sluice-research", "SlurmNodeState", &configv1.SlurmNodeStateArgs{Slurm: slurm})
	harness.StartScheduler(t, cp, cfg)
}

// slurmNodes creates the Kubernetes nodes gpu01..gpu08 of the test Slurm
// (8 GPUs each, marked Slurm-managed), optionally with fabric labels.
func slurmNodes(t testing.TB, cp *harness.ControlPlane, labels map[string]string) {
	t.Helper()
	var nodes []*v1.Node
	for i := 1; i <= 8; i++ {
		b := harness.GPUNode(fmt.Sprintf("gpu%02d", i), 8).Label("sluice.dev/slurm-managed", "true")
		for k, v := range labels {
			b = b.Label(k, v)
		}
		nodes = append(nodes, b.Obj())
	}
	harness.CreateNodes(t, cp.Client, nodes...)
}

// waitSlurm waits until sinfo shows a node in a state containing want.
func (e slurmEnv) waitState(t *testing.T, node, want string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(e.nodeState(t, node), want), nil
	}, func() string { return fmt.Sprintf("Slurm node %s is %q, want %q", node, e.nodeState(t, node), want) })
}

// patchLabel sets a node label.
func patchLabel(t *testing.T, cp *harness.ControlPlane, node, key, value string) {
	t.Helper()
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[key] = value
	if _, err := cp.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
