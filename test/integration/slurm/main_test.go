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
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/localcluster"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.WithCRDs("manifests/crds/scheduling.x-k8s.io_podgroups.yaml"), harness.WithCleanup(closeTLSFronts))
}

// slurmEnv is a running test Slurm: 22.05 on the host (hack/slurm-up.sh,
// $SLURM_CI_DIR/slurm.env) or 24.11 in a Debian trixie chroot
// (hack/slurm24-up.sh, $SLURM24_HOSTDIR/slurm24.env).
type slurmEnv struct {
	// name is the version, as subtests are named.
	name string
	// dir holds pids/ (and, for 22.05, the state).
	dir  string
	conf string
	// url is slurmrestd behind a TLS front (caFile verifies it): sluice
	// sends its token only over https.
	url, caFile string
	socket      string
	user        string
	tokenFile   string
	topology    string
	// bin is the directory of this Slurm's client commands (wrappers
	// that enter the chroot); empty: the host's, with SLURM_CONF=conf.
	bin string
	// restWrites: slurmrestd's API (v0.0.39 and later) can update nodes
	// and pin jobs, so sluice writes through it; otherwise through the
	// commands (slurm.commands).
	restWrites bool
	// up (re)starts whatever of this Slurm is not running.
	up string
}

// readEnv reads the export lines of an env file.
func readEnv(t testing.TB, file, hint string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("no running test Slurm (%v): run %s first (make test and .ci/run do)", err, hint)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = strings.Trim(v, `"`)
		}
	}
	return vars
}

// liveSlurm is the test Slurm 22.05; a missing Slurm fails the test (never
// a skip).
func liveSlurm(t testing.TB) slurmEnv {
	t.Helper()
	dir := os.Getenv("SLURM_CI_DIR")
	if dir == "" {
		dir = "/tmp/slurm-ci"
	}
	vars := readEnv(t, filepath.Join(dir, "slurm.env"), "hack/slurm-up.sh")
	env := slurmEnv{name: "22.05", dir: dir, conf: vars["SLURM_CONF"], url: vars["SLURMRESTD_URL"], socket: vars["SLURMRESTD_SOCKET"],
		user: vars["SLURMRESTD_USER"], tokenFile: vars["SLURMRESTD_TOKEN_FILE"], topology: vars["SLURM_TOPOLOGY_CONF"],
		up: filepath.Join(harness.ModuleRoot(t), "hack", "slurm-up.sh")}
	env.check(t)
	env.withTLSFront(t)
	return env
}

// liveSlurm24 is the test Slurm 24.11 (slurmrestd v0.0.40-v0.0.42).
func liveSlurm24(t testing.TB) slurmEnv {
	t.Helper()
	dir := os.Getenv("SLURM24_HOSTDIR")
	if dir == "" {
		dir = "/var/tmp/trixie/var/tmp/slurm24"
	}
	vars := readEnv(t, filepath.Join(dir, "slurm24.env"), "hack/slurm24-up.sh")
	env := slurmEnv{name: "24.11", dir: dir, url: vars["SLURMRESTD_URL"], socket: vars["SLURMRESTD_SOCKET"],
		user: vars["SLURMRESTD_USER"], tokenFile: vars["SLURMRESTD_TOKEN_FILE"], topology: filepath.Join(dir, "etc", "topology.conf"),
		bin: vars["SLURM24_BIN"], restWrites: true, up: filepath.Join(harness.ModuleRoot(t), "hack", "slurm24-up.sh")}
	env.check(t)
	env.withTLSFront(t)
	return env
}

func (e slurmEnv) check(t testing.TB) {
	t.Helper()
	if e.url == "" || e.tokenFile == "" {
		t.Fatalf("Slurm %s: its env file lacks SLURMRESTD_URL or SLURMRESTD_TOKEN_FILE; re-run %s", e.name, e.up)
	}
	if out, err := e.run("scontrol", "ping"); err != nil || !strings.Contains(out, "UP") {
		t.Fatalf("test Slurm %s is not answering (scontrol ping: %q, %v): run %s", e.name, out, err, e.up)
	}
}

// fronts are the TLS fronts of the test Slurms' slurmrestd (which serves
// no TLS of its own), one per Slurm for the life of the test process.
var (
	frontsMu sync.Mutex
	fronts   = map[string]*localcluster.TLSFront{}
)

// closeTLSFronts stops the TLS fronts and removes their certificates.
func closeTLSFronts() {
	frontsMu.Lock()
	defer frontsMu.Unlock()
	for name, f := range fronts {
		f.Close()
		delete(fronts, name)
	}
}

// withTLSFront points e.url at its Slurm's TLS front, started on first use.
func (e *slurmEnv) withTLSFront(t testing.TB) {
	t.Helper()
	frontsMu.Lock()
	defer frontsMu.Unlock()
	f := fronts[e.name]
	if f == nil {
		u, err := url.Parse(e.url)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			t.Fatalf("Slurm %s: SLURMRESTD_URL %q is not http://host:port; re-run %s", e.name, e.url, e.up)
		}
		if f, err = localcluster.NewTLSFront(u.Host, e.dir); err != nil {
			t.Fatalf("Slurm %s: %v", e.name, err)
		}
		fronts[e.name] = f
	}
	e.url, e.caFile = f.URL, f.CAFile
}

// slurms are the test Slurms, by subtest name.
var slurms = []struct {
	name string
	live func(testing.TB) slurmEnv
}{{"slurm-22.05", liveSlurm}, {"slurm-24.11", liveSlurm24}}

// eachSlurm runs f as a subtest against each test Slurm: 22.05 and 24.11.
func eachSlurm(t *testing.T, f func(t *testing.T, env slurmEnv)) {
	for _, s := range slurms {
		t.Run(s.name, func(t *testing.T) { f(t, s.live(t)) })
	}
}

// writes makes the scheduler write to this Slurm as it can: through
// slurmrestd, or through the commands where the API cannot.
func (e slurmEnv) writes(t testing.TB, args *configv1.SlurmConfig) *configv1.SlurmConfig {
	if !e.restWrites {
		args.Commands = ptr.To(e.commands(t))
	}
	return args
}

// run runs a Slurm command against the test cluster.
func (e slurmEnv) run(name string, args ...string) (string, error) {
	path := name
	if e.bin != "" {
		path = filepath.Join(e.bin, name)
	}
	cmd := exec.Command(path, args...)
	if e.conf != "" {
		cmd.Env = append(os.Environ(), "SLURM_CONF="+e.conf)
	}
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
		CAFile:                ptr.To(e.caFile),
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
