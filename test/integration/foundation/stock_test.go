// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/test/harness"
)

// TestShippedDeploymentOnStockCluster installs the kustomization on an
// apiserver that does not serve the native Workload API, as most managed
// clusters are, and runs the real scheduler binary with the shipped
// Deployment's arguments and the shipped configuration as the shipped
// ServiceAccount. scheduler-plugins gangs and plain pods must be placed,
// and the scheduler must say once which gang API it reads. The same
// scheduler with the native gates on must stop at start-up naming the
// missing API, not wait for it forever.
func TestShippedDeploymentOnStockCluster(t *testing.T) {
	objs := harness.Kustomize(t, filepath.Join(harness.ModuleRoot(t), "manifests"))
	runShipped(t, objs, true)
}

// TestHelmChartOnStockCluster does the same with the Helm chart: its
// CRDs and its default rendering (`helm template`) applied to an apiserver
// without the native Workload API, the scheduler run with the rendered
// Deployment's arguments and ConfigMap as the rendered ServiceAccount.
func TestHelmChartOnStockCluster(t *testing.T) {
	runShipped(t, chartObjects(t), false)
}

// chartObjects are what `helm install` of the chart with its defaults
// (and set, helm's --set arguments) creates in sluice-system: the
// namespace, its CRDs and its templates.
func chartObjects(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	root := harness.ModuleRoot(t)
	objs := harness.DecodeYAML(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: sluice-system}\n"))
	crds, err := filepath.Glob(filepath.Join(root, "charts", "sluice", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in charts/sluice/crds: %v", err)
	}
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, harness.DecodeYAML(t, data)...)
	}
	return append(objs, harness.DecodeYAML(t, harness.Helm(t, append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system"}, set...)...))...)
}

// runShipped creates objs on a stock control plane and runs the real
// scheduler binary with their Deployment's arguments and ConfigMap as
// their ServiceAccount; gated also checks that the native gates stop it
// at start-up there.
func runShipped(t *testing.T, objs []*unstructured.Unstructured, gated bool) {
	cp := harness.StartStockControlPlane(t)
	harness.CreateObjects(t, cp, objs)
	bin, args := shippedScheduler(t, cp, objs)

	// The native gates on, the API off: a clear stop at start-up.
	if gated {
		gated := append(append([]string{}, args...), "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
		p := harness.StartProcess(t, "gated-scheduler", bin, gated...)
		select {
		case <-p.Exited():
		case <-time.After(harness.DefaultTimeout):
			t.Fatalf("the scheduler with the native gates on still runs after %v on an apiserver without scheduling.k8s.io/v1beta1; it should stop at start-up and say why", harness.DefaultTimeout)
		}
		log, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"scheduling.k8s.io/v1beta1", "GenericWorkload", "--runtime-config"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("the scheduler's start-up error does not name %q:\n%s", want, tailString(string(log), 10))
			}
		}
	}

	// The shipped arguments: gangs through scheduler-plugins PodGroups.
	{
		p := harness.StartProcess(t, "sluice-scheduler", bin, args...)
		ns := harness.NewNamespace(t, cp.Client)
		harness.CreateNodes(t, cp.Client,
			harness.GPUNode("stock-n1", 8).Fabric("l1", "s1", "b1").Obj(),
			harness.GPUNode("stock-n2", 8).Fabric("l1", "s1", "b1").Obj(),
			harness.GPUNode("stock-n3", 8).Fabric("l2", "s1", "b1").Obj())
		harness.CreateLabelPodGroup(t, cp, harness.LabelPodGroup(ns, "train", 3, 60, nil))
		names := []string{"inference"}
		harness.CreatePods(t, cp.Client, harness.Pod(ns, "inference").GPUs(1).Obj())
		for i := range 3 {
			name := "train-" + string(rune('0'+i))
			names = append(names, name)
			harness.CreatePods(t, cp.Client, harness.Pod(ns, name).Scheduler("sluice-research").GPUs(4).
				Label("scheduling.x-k8s.io/pod-group", "train").Obj())
		}
		harness.WaitForPodsBound(t, cp.Client, ns, names...)
		log, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		said := strings.Count(string(log), "Gang APIs")
		if said != 1 {
			t.Errorf("the scheduler said which gang APIs it reads %d times, want once at start-up:\n%s", said, tailString(string(log), 20))
		}
		if !strings.Contains(string(log), "native Workload API off") {
			t.Errorf("the scheduler does not say the native Workload API is off")
		}
	}
}

// shippedScheduler is the scheduler binary and the shipped Deployment's
// arguments, with the shipped configuration reaching cp as the shipped
// ServiceAccount.
func shippedScheduler(t *testing.T, cp *harness.ControlPlane, objs []*unstructured.Unstructured) (bin string, args []string) {
	t.Helper()
	args = shippedSchedulerArgs(t, objs)

	// The shipped configuration, reaching the apiserver as the
	// ServiceAccount; the serving port is the only argument changed.
	var shipped string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "sluice-scheduler-config") {
			shipped, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	if shipped == "" {
		t.Fatal("no ConfigMap sluice-scheduler-config with a config.yaml")
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(shipped), &cfg); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.KubeconfigAs(t.TempDir(), "system:serviceaccount:sluice-system:sluice-scheduler",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--config="):
			args[i] = "--config=" + file
		case strings.HasPrefix(a, "--secure-port="):
			args[i] = "--secure-port=0"
		}
	}
	return harness.Binary(t, "sluice-scheduler"), args
}

// shippedSchedulerArgs are the sluice-scheduler container's arguments in
// the shipped Deployment.
func shippedSchedulerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "sluice-scheduler" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c, _ := c.(map[string]any)
			if c["name"] != "sluice-scheduler" {
				continue
			}
			args, _, err := unstructured.NestedStringSlice(c, "args")
			if err != nil || len(args) == 0 {
				t.Fatalf("the shipped Deployment's container has no arguments: %v", err)
			}
			return args
		}
	}
	t.Fatal("no sluice-scheduler Deployment with a sluice-scheduler container in manifests/")
	return nil
}

func tailString(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
