// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestManifests creates everything under manifests/ (the kustomization and
// the examples) on the real apiserver with strict field validation, so a
// manifest that stops being valid fails here. Then it runs the scheduler
// with the shipped ConfigMap's configuration as the shipped ServiceAccount,
// so the shipped RBAC is proven sufficient for scheduling pods and gangs.
func TestManifests(t *testing.T) {
	cp := harness.Shared(t)
	root := harness.ModuleRoot(t)

	rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	kustomized, err := rendered.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, kustomized)
	examples, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples in manifests/examples: %v", err)
	}
	for _, f := range examples {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decodeAll(t, data)...)
	}
	createAll(t, cp, objs)

	// The ConfigMap carries the shipped configuration file verbatim.
	var config string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() == "sluice-system" {
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

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// createAll creates namespaces and CRDs first (waiting until CRDs are
// served), then everything else, with strict field validation.
func createAll(t *testing.T, cp *harness.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	first := func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition"
	}
	for _, pass := range []bool{true, false} {
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))
		for _, o := range objs {
			if first(o) != pass {
				continue
			}
			gvk := o.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s %s: no such API: %v", gvk, o.GetName(), err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
			if mapping.Scope.Name() == apimeta.RESTScopeNameNamespace {
				ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
			}
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatalf("creating %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
			}
			if o.GetKind() == "CustomResourceDefinition" {
				waitEstablished(t, dyn, o.GetName())
			}
		}
	}
}

func waitEstablished(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	gvr := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	harness.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return "CRD " + name + " not established" })
}

// TestPriorityClassesMatchManifests keeps the classes the harness, the
// simulator and the demo create equal to the shipped ones.
func TestPriorityClassesMatchManifests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "manifests", "priorityclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]*schedulingv1.PriorityClass{}
	for _, u := range decodeAll(t, data) {
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
