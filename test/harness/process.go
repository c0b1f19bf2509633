// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
)

var (
	binMu   sync.Mutex
	binDir  string
	binPath = map[string]string{}
)

// Binary returns a sluice command built from this module (go build, with
// the build cache, once per test binary), e.g. Binary(t,
// "sluice-scheduler"). $SLUICE_SCHEDULER_BIN (the command's name in upper
// case, dashes as underscores, without "SLUICE_" doubled) points a test
// at another build instead, to run it against an older commit.
func Binary(t testing.TB, command string) string {
	t.Helper()
	env := strings.ToUpper(strings.ReplaceAll(command, "-", "_")) + "_BIN"
	if p := os.Getenv(env); p != "" {
		return p
	}
	return build(t, command, command, ModuleRoot(t), "./cmd/"+command)
}

// build builds pkg in dir as name, once per test binary (key).
func build(t testing.TB, key, name, dir, pkg string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPath[key]; ok {
		return p
	}
	if binDir == "" {
		dir, err := os.MkdirTemp("", "sluice-test-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = dir
		atExit(func() { _ = os.RemoveAll(dir) })
	}
	out := filepath.Join(binDir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, msg)
	}
	binPath[key] = out
	return out
}

// Tool is the path of a third-party program the tests run for real,
// built from its module hack/<name> (a go.mod of its own, so its
// dependencies never reach sluice's): the one program its tool directive
// names, or else the module's main package. $<NAME>_BIN overrides it.
func Tool(t testing.TB, name string) string {
	t.Helper()
	env := strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_BIN"
	if p := os.Getenv(env); p != "" {
		return p
	}
	dir := filepath.Join(ModuleRoot(t), "hack", name)
	list := exec.Command("go", "mod", "edit", "-json")
	list.Dir = dir
	data, err := list.Output()
	if err != nil {
		t.Fatalf("tool %s: reading %s/go.mod: %v", name, dir, err)
	}
	var mod struct{ Tool []struct{ Path string } }
	if err := json.Unmarshal(data, &mod); err != nil || len(mod.Tool) > 1 {
		t.Fatalf("tool %s: %s/go.mod must name at most one tool (%v)", name, dir, err)
	}
	pkg := "."
	if len(mod.Tool) == 1 {
		pkg = mod.Tool[0].Path
	}
	return build(t, "tool:"+name, name, dir, pkg)
}

var (
	exitMu    sync.Mutex
	exitFuncs []func()
)

// atExit runs f when the test binary's tests are done (harness.Main).
func atExit(f func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	exitFuncs = append(exitFuncs, f)
}

func runAtExit() {
	exitMu.Lock()
	fs := exitFuncs
	exitFuncs = nil
	exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Process is a real process the test started: killing it is a crash, not
// a context cancel.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// StartProcess starts bin with args, its output in a log file of the
// test's, until Kill or the end of the test (SIGTERM then). A failing
// test prints the log's last lines.
func StartProcess(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("sluice's controllers in %s:\n%s", name, grepLog(log, 150, `logger="claims"`, `logger="return"`, "leaderelection"))
			t.Logf("last lines of %s:\n%s", name, tail(log, 30))
		}
	})
	return p
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill() { p.stop(syscall.SIGKILL) }

// Terminate sends SIGTERM, as kubelet does to a pod's container, and
// waits (30 s, then SIGKILL) for the process to exit.
func (p *Process) Terminate() { p.stop(syscall.SIGTERM) }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

func (p *Process) stop(sig syscall.Signal) {
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// grepLog is the last max lines of file containing any of words.
func grepLog(file string, max int, words ...string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var out [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		for _, w := range words {
			if bytes.Contains(line, []byte(w)) {
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return string(bytes.Join(out, []byte("\n")))
}

func tail(file string, lines int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// LeaderElection is how scheduler processes elect their leader: a Lease
// in Namespace, quick durations so a test sees a failover in seconds.
type LeaderElection struct {
	Namespace string
	Lease     string
}

// StartSchedulerProcess runs bin/sluice-scheduler (Binary) with cfg,
// pointed at cp, electing its leader with the Lease le (lease 4 s, renew
// 3 s, retry 0.5 s), no serving port, the control plane's feature gates.
func StartSchedulerProcess(t testing.TB, cp *ControlPlane, cfg *SchedulerConfig, name string, le LeaderElection) *Process {
	t.Helper()
	out := cfg.DeepCopy()
	out.APIVersion = configv1.SchemeGroupVersion.String()
	out.Kind = "KubeSchedulerConfiguration"
	out.ClientConnection.Kubeconfig = cp.Kubeconfig
	out.LeaderElection.LeaderElect = ptr.To(true)
	out.LeaderElection.ResourceNamespace = le.Namespace
	out.LeaderElection.ResourceName = le.Lease
	out.LeaderElection.LeaseDuration.Duration = 4 * time.Second
	out.LeaderElection.RenewDeadline.Duration = 3 * time.Second
	out.LeaderElection.RetryPeriod.Duration = 500 * time.Millisecond
	data, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name+"-config.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return StartProcess(t, name, Binary(t, "sluice-scheduler"),
		"--config="+file, "--secure-port=0", "--v=2",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
}

// LeaseHolder is who holds a Lease now ("" when nobody does).
func LeaseHolder(t testing.TB, cp *ControlPlane, le LeaderElection) string {
	t.Helper()
	lease, err := cp.Client.CoordinationV1().Leases(le.Namespace).Get(context.Background(), le.Lease, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// String names a process for messages.
func (p *Process) String() string { return fmt.Sprintf("%s (pid %d)", p.Name, p.cmd.Process.Pid) }
