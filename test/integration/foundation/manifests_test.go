// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestManifests creates everything under manifests/ (the kustomization,
// the monitoring one and the examples) on the real apiserver with strict field validation, so a
// manifest that stops being valid fails here. Then it runs the scheduler
// with the shipped ConfigMap's configuration as the shipped ServiceAccount,
// so the shipped RBAC is proven sufficient for scheduling pods and gangs.
func TestManifests(t *testing.T) {
	cp := harness.Shared(t)
	root := harness.ModuleRoot(t)

	objs := harness.Kustomize(t, filepath.Join(root, "manifests"))
	examples, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples in manifests/examples: %v", err)
	}
	for _, f := range examples {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, harness.DecodeYAML(t, data)...)
	}
	// The monitoring kustomization, but for the Prometheus Operator's
	// kinds (their CRDs are not installed here; make monitoring checks
	// the rules and the dashboard).
	for _, o := range harness.Kustomize(t, filepath.Join(root, "manifests", "monitoring")) {
		if o.GroupVersionKind().Group != "monitoring.coreos.com" {
			objs = append(objs, o)
		}
	}
	harness.CreateObjects(t, cp, objs)

	// The ConfigMap carries the shipped configuration file verbatim.
	var config string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() == "sluice-system" && strings.HasPrefix(o.GetName(), "sluice-scheduler-config") {
			config, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	shipped, err := os.ReadFile(filepath.Join(root, harness.ShippedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if config != string(shipped) {
		t.Fatalf("the ConfigMap's config.yaml differs from %s", harness.ShippedConfig)
	}

	// Schedule as the ServiceAccount, with the shipped RBAC only.
	ns := harness.NewNamespace(t, cp.Client)
	harness.CreateNodes(t, cp.Client,
		harness.GPUNode("rbac-n1", 8).Fabric("l1", "s1", "b1").Obj(),
		harness.GPUNode("rbac-n2", 8).Fabric("l1", "s1", "b1").Obj(),
		harness.GPUNode("rbac-n3", 8).Fabric("l1", "s1", "b1").Obj())
	kubeconfig, err := cp.KubeconfigAs(t.TempDir(), "system:serviceaccount:sluice-system:sluice-scheduler",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &harness.SchedulerConfig{}
	if err := yaml.Unmarshal(shipped, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.ClientConnection.Kubeconfig = kubeconfig
	harness.StartScheduler(t, cp, cfg)

	harness.CreatePods(t, cp.Client, harness.Pod(ns, "inference").GPUs(1).Obj())
	harness.CreateNativePodGroup(t, cp.Client, harness.NativePodGroup(ns, "native", 2, nil))
	harness.CreateLabelPodGroup(t, cp, harness.LabelPodGroup(ns, "label", 2, 30, nil))
	for i, name := range []string{"native-0", "native-1", "label-0", "label-1"} {
		b := harness.Pod(ns, name).Scheduler("sluice-research").GPUs(4)
		if i < 2 {
			b = b.SchedulingGroup("native")
		} else {
			b = b.Label("scheduling.x-k8s.io/pod-group", "label")
		}
		harness.CreatePods(t, cp.Client, b.Obj())
	}
	harness.WaitForPodsBound(t, cp.Client, ns, "inference", "native-0", "native-1", "label-0", "label-1")
	// Status writes need podgroups/status in both API groups.
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "inference", "Scheduled")
}

// TestPriorityClassesMatchManifests keeps the classes the harness, the
// simulator and the demo create equal to the shipped ones.
func TestPriorityClassesMatchManifests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "manifests", "priorityclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]*schedulingv1.PriorityClass{}
	for _, u := range harness.DecodeYAML(t, data) {
		pc := &schedulingv1.PriorityClass{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pc); err != nil {
			t.Fatal(err)
		}
		shipped[pc.Name] = pc
	}
	for _, pc := range localcluster.PriorityClasses() {
		s, ok := shipped[pc.Name]
		if !ok {
			t.Errorf("PriorityClass %s is not in manifests/priorityclasses.yaml", pc.Name)
			continue
		}
		if s.Value != pc.Value || *s.PreemptionPolicy != *pc.PreemptionPolicy || s.Description != pc.Description {
			t.Errorf("PriorityClass %s differs from the manifest: %d %s %q vs %d %s %q", pc.Name,
				pc.Value, *pc.PreemptionPolicy, pc.Description, s.Value, *s.PreemptionPolicy, s.Description)
		}
	}
}
