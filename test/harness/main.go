// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/internal/nodesim"
)

// LogEnv names the environment variable that keeps component logs on
// stderr ("stderr") instead of in a per-package file.
const LogEnv = "SLUICE_TEST_LOG"

// VerbosityEnv names the environment variable that sets the components'
// log verbosity (klog -v) in the log file.
const VerbosityEnv = "SLUICE_TEST_V"

// redirectLogs sends the logs of the in-process components (apiserver,
// etcd, scheduler, controllers) to a file, so test output stays readable;
// a failing test prints the lines about its own namespaces and nodes. The
// returned func restores stderr logging.
func redirectLogs() (string, func(*int)) {
	if os.Getenv(LogEnv) == "stderr" {
		return "", func(*int) {}
	}
	f, err := os.CreateTemp("", "sluice-test-*.log")
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: logs stay on stderr: %v\n", err)
		return "", func(*int) {}
	}
	klog.LogToStderr(false)
	klog.SetOutput(f)
	// klog copies errors to stderr by default; keep them in the file too.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("stderrthreshold", "FATAL")
	if v := os.Getenv(VerbosityEnv); v != "" {
		_ = fs.Set("v", v)
	}
	setLogPath(f.Name())
	return f.Name(), func(code *int) {
		klog.Flush()
		klog.LogToStderr(true)
		_ = f.Close()
		if *code != 0 {
			// Each failing test printed its own lines (see tellStory).
			fmt.Fprintf(os.Stderr, "harness: component logs of the whole package: %s (set %s=stderr to see them live)\n", f.Name(), LogEnv)
		}
	}
}

// ControlPlane is etcd plus kube-apiserver in the test process.
type ControlPlane = localcluster.ControlPlane

var (
	sharedMu sync.Mutex
	shared   *ControlPlane
	remote   *ControlPlane
	// controllers are the kube-controller-manager controllers running.
	controllers *kcm.Running
)

// Main runs a test package against one control plane (etcd +
// kube-apiserver) that all its tests share, each in its own namespace:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// Starting a control plane costs 2-4 s and 150-300 MB, so one per package
// keeps the suite fast. A package that cannot start one fails; it never
// skips.
func Main(m *testing.M, opts ...Option) {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	os.Exit(runMain(m, o))
}

// Option configures the package's control plane.
type Option func(*mainOptions)

type mainOptions struct {
	apiServerFlags []string
	crds           []string
	controllers    bool
	nodeSim        *nodesim.Options
	priorityClass  bool
	remote         *nodesim.Options
	network        bool
	cleanups       []func()
}

// WithCleanup runs f once the package's tests have run, however they end.
func WithCleanup(f func()) Option {
	return func(o *mainOptions) { o.cleanups = append(o.cleanups, f) }
}

// WithControllers runs the ReplicaSet, Deployment, StatefulSet and
// disruption controllers for the package's tests (evicted pods get
// replaced, PDB status is kept current). The namespace controller and the
// garbage collector run in every package.
func WithControllers() Option { return func(o *mainOptions) { o.controllers = true } }

// WithNodeSimulator runs a node simulator that marks pods bound to
// simulated nodes Running and Ready (see internal/nodesim).
func WithNodeSimulator(opts nodesim.Options) Option {
	return func(o *mainOptions) { o.nodeSim = &opts }
}

// WithPriorityClasses creates the shipped PriorityClasses (research,
// production).
func WithPriorityClasses() Option { return func(o *mainOptions) { o.priorityClass = true } }

// WithRemoteCluster starts a second control plane, the "remote" cluster an
// overflow provider bursts into, with the stock kube-scheduler and a node
// simulator (sim) of its own. Tests reach it with Remote.
func WithRemoteCluster(sim nodesim.Options) Option {
	return func(o *mainOptions) { o.remote = &sim }
}

// WithNetwork runs the EndpointSlice controller (Services list the pods
// they select) and gives the apiservers a kubelet client certificate from
// a CA of the package's own (KubeletClientCA), so they reach a kubelet
// endpoint for pod logs as KubeletClientUser.
func WithNetwork() Option { return func(o *mainOptions) { o.network = true } }

// WithAPIServerFlags adds kube-apiserver flags.
func WithAPIServerFlags(flags ...string) Option {
	return func(o *mainOptions) { o.apiServerFlags = append(o.apiServerFlags, flags...) }
}

// WithCRDs installs the CustomResourceDefinitions in these files (relative
// to the module root) before the tests run.
func WithCRDs(files ...string) Option {
	return func(o *mainOptions) { o.crds = append(o.crds, files...) }
}

func runMain(m *testing.M, o mainOptions) (code int) {
	logFile, restoreLogs := redirectLogs()
	defer restoreLogs(&code)
	var tbOut io.Writer = os.Stderr
	etcdLog := ""
	if logFile != "" {
		if f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			defer f.Close()
			tbOut = f
		}
		etcdLog = logFile + ".etcd"
	}
	tb := localcluster.NewProcessTB("harness", tbOut)
	for _, f := range o.cleanups {
		tb.Cleanup(f)
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(localcluster.Fatal); !ok {
				panic(r)
			}
			fmt.Fprintf(os.Stderr, "harness: control plane failed: %v\n", r)
			code = 1
		}
		tb.RunCleanups()
	}()
	flags := o.apiServerFlags
	var kubeletFlags []string
	if o.network {
		var err error
		if kubeletCA, err = localcluster.NewKubeletPKI(tb.TempDir()); err != nil {
			fmt.Fprintf(os.Stderr, "harness: kubelet client certificate: %v\n", err)
			return 1
		}
		kubeletFlags = kubeletCA.Flags()
		flags = append(append([]string{}, flags...), kubeletFlags...)
	}
	cp, err := localcluster.StartControlPlane(tb, etcdLog, flags...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: %v\n", err)
		return 1
	}
	defer cp.Stop()
	if err := InstallCRDs(cp, moduleRootFromWD(), o.crds...); err != nil {
		fmt.Fprintf(os.Stderr, "harness: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.priorityClass {
		if err := localcluster.CreatePriorityClasses(ctx, cp.Client); err != nil {
			fmt.Fprintf(os.Stderr, "harness: %v\n", err)
			return 1
		}
	}
	// The namespace controller and the garbage collector always run, so a
	// test's namespace is really emptied and removed when it ends.
	running, err := kcm.Start(ctx, cp.Config, kcm.Set{Workloads: o.controllers, Cleanup: true, Network: o.network})
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: controllers: %v\n", err)
		return 1
	}
	if o.nodeSim != nil {
		if _, err := nodesim.Start(ctx, cp.Client, *o.nodeSim); err != nil {
			fmt.Fprintf(os.Stderr, "harness: node simulator: %v\n", err)
			return 1
		}
	}
	var rcp *ControlPlane
	if o.remote != nil {
		rcp, err = startRemote(ctx, tb, etcdLog, *o.remote, kubeletFlags...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "harness: remote cluster: %v\n", err)
			return 1
		}
		defer rcp.Stop()
	}
	sharedMu.Lock()
	shared, remote, controllers = cp, rcp, running
	sharedMu.Unlock()
	defer runAtExit()
	return m.Run()
}

// WithoutDisruptionController stops the disruption controller for the
// rest of the test, as when kube-controller-manager is down, and starts a
// fresh one when the test ends. The test must not run in parallel with
// others of its package (they share the controller).
func WithoutDisruptionController(t testing.TB) {
	t.Helper()
	StopDisruptionController(t)
}

// StopDisruptionController stops the disruption controller now and returns
// the function that starts a fresh one (called at the end of the test if
// the test does not call it first).
func StopDisruptionController(t testing.TB) (restart func()) {
	t.Helper()
	sharedMu.Lock()
	running := controllers
	sharedMu.Unlock()
	if running == nil {
		t.Fatal("harness: no controllers: pass harness.WithControllers to harness.Main")
	}
	var once sync.Once
	start := running.StopDisruption()
	restart = func() { once.Do(start) }
	t.Cleanup(restart)
	return restart
}

// Remote returns the package's remote cluster; it fails the test when the
// package's TestMain does not ask for one (WithRemoteCluster).
func Remote(t testing.TB) *ControlPlane {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if remote == nil {
		t.Fatal("harness: no remote cluster: pass harness.WithRemoteCluster to harness.Main")
	}
	return remote
}

// startRemote starts the remote cluster: its own etcd and apiserver, the
// stock kube-scheduler (default profile) and a node simulator.
func startRemote(ctx context.Context, tb *localcluster.ProcessTB, etcdLog string, sim nodesim.Options, flags ...string) (*ControlPlane, error) {
	if etcdLog != "" {
		etcdLog += ".remote"
	}
	rcp, err := localcluster.StartControlPlane(tb, etcdLog, flags...)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(tb.TempDir(), "remote-scheduler.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
clientConnection: {kubeconfig: %q}
profiles: [{schedulerName: default-scheduler}]
`, rcp.Kubeconfig)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		rcp.Stop()
		return nil, err
	}
	if _, err := localcluster.RunScheduler(ctx, file); err != nil {
		rcp.Stop()
		return nil, fmt.Errorf("remote kube-scheduler: %w", err)
	}
	if _, err := nodesim.Start(ctx, rcp.Client, sim); err != nil {
		rcp.Stop()
		return nil, fmt.Errorf("remote node simulator: %w", err)
	}
	return rcp, nil
}

// Shared returns the package's control plane; it fails the test when the
// package's TestMain does not call Main.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("harness: no control plane: the package's TestMain must call harness.Main(m)")
	}
	return shared
}
