// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/localcluster"
)

// ShippedConfig is the KubeSchedulerConfiguration users deploy, relative to
// the module root.
const ShippedConfig = "manifests/scheduler-config.yaml"

// SchedulerConfig is a KubeSchedulerConfiguration being prepared for an
// in-process scheduler.
type SchedulerConfig = configv1.KubeSchedulerConfiguration

// LoadShippedConfig reads the shipped scheduler configuration.
func LoadShippedConfig(t testing.TB) *SchedulerConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ModuleRoot(t), ShippedConfig))
	if err != nil {
		t.Fatalf("reading the shipped scheduler config: %v", err)
	}
	cfg := &SchedulerConfig{}
	if err := yaml.Unmarshal(data, cfg); err != nil {
		t.Fatalf("parsing %s: %v", ShippedConfig, err)
	}
	return cfg
}

// PluginArgs decodes the args of plugin in profile into args (a v1 args
// object), to change some of them and set them back with SetPluginArgs. It
// fails the test when the plugin has no args there.
func PluginArgs(t testing.TB, cfg *SchedulerConfig, profile, plugin string, args runtime.Object) {
	t.Helper()
	for _, p := range cfg.Profiles {
		if ptr.Deref(p.SchedulerName, "") != profile {
			continue
		}
		for _, pc := range p.PluginConfig {
			if pc.Name == plugin && pc.Args.Raw != nil {
				if err := yaml.Unmarshal(pc.Args.Raw, args); err != nil {
					t.Fatalf("decoding the args of %s in %s: %v", plugin, profile, err)
				}
				return
			}
		}
	}
	t.Fatalf("no args of %s in profile %q of the scheduler config", plugin, profile)
}

// SetPluginArgs replaces the args of plugin in profile with args (a v1 args
// object, e.g. &v1.FabricTopologyArgs{...}). It fails the test when the
// profile does not exist.
func SetPluginArgs(t testing.TB, cfg *SchedulerConfig, profile, plugin string, args runtime.Object) {
	t.Helper()
	raw, err := yaml.Marshal(args)
	if err != nil {
		t.Fatalf("encoding args of %s: %v", plugin, err)
	}
	json, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("encoding args of %s: %v", plugin, err)
	}
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		if ptr.Deref(p.SchedulerName, "") != profile {
			continue
		}
		for j := range p.PluginConfig {
			if p.PluginConfig[j].Name == plugin {
				p.PluginConfig[j].Args = runtime.RawExtension{Raw: json}
				return
			}
		}
		p.PluginConfig = append(p.PluginConfig, configv1.PluginConfig{Name: plugin, Args: runtime.RawExtension{Raw: json}})
		return
	}
	t.Fatalf("no profile %q in the scheduler config", profile)
}

// WriteSchedulerConfig writes cfg, pointed at cp (unless it names a
// kubeconfig already) and with leader election off, into a file in dir and
// returns its path.
func WriteSchedulerConfig(cp *ControlPlane, cfg *SchedulerConfig, dir string) (string, error) {
	out := cfg.DeepCopy()
	out.APIVersion = configv1.SchemeGroupVersion.String()
	out.Kind = "KubeSchedulerConfiguration"
	if out.ClientConnection.Kubeconfig == "" {
		out.ClientConnection.Kubeconfig = cp.Kubeconfig
	}
	out.LeaderElection.LeaderElect = ptr.To(false)
	data, err := yaml.Marshal(out)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "scheduler-config.yaml")
	return file, os.WriteFile(file, data, 0o600)
}

// Scheduler is a sluice-scheduler running in the test process.
type Scheduler = localcluster.Scheduler

// StartScheduler starts sluice-scheduler in this process through
// kube-scheduler's own start-up path (app.Setup: config file, strict
// decoding, validation, sluice's registry) and runs it until the test ends.
// It fails the test when start-up fails.
func StartScheduler(t testing.TB, cp *ControlPlane, cfg *SchedulerConfig) *Scheduler {
	t.Helper()
	s, err := TryStartScheduler(t, cp, cfg)
	if err != nil {
		t.Fatalf("starting sluice-scheduler: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TryStartScheduler is StartScheduler returning the start-up error instead
// of failing, for tests of invalid configurations.
func TryStartScheduler(t testing.TB, cp *ControlPlane, cfg *SchedulerConfig) (*Scheduler, error) {
	t.Helper()
	file, err := WriteSchedulerConfig(cp, cfg, t.TempDir())
	if err != nil {
		return nil, err
	}
	return localcluster.RunScheduler(context.Background(), file)
}

// RunSchedulerFromFile starts sluice-scheduler from a configuration file.
func RunSchedulerFromFile(ctx context.Context, configFile string) (*Scheduler, error) {
	return localcluster.RunScheduler(ctx, configFile)
}

// ModuleRoot is the directory of sluice's go.mod, found from the working
// directory (go test runs in the package's directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root := moduleRootFromWD()
	if root == "" {
		t.Fatalf("no go.mod above the working directory")
	}
	return root
}

func moduleRootFromWD() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
