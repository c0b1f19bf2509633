// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/test/harness"
)

// allToggles renders every optional part of the chart.
var allToggles = []string{"--set", "overflowNode.enabled=true,monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"}

// TestHelmChartLint runs `helm lint --strict` on the chart with its
// defaults, with every part on, with renamed PriorityClasses and the
// native gates on, and with the overflow node alone (no scheduler object
// rendered).
func TestHelmChartLint(t *testing.T) {
	for _, set := range [][]string{nil, allToggles,
		{"--set", "priorityClasses.prefix=acme-,priorityClasses.create=false,scheduler.nativeWorkloadAPI=true,scheduler.priorityClassName=system-cluster-critical"}} {
		harness.Helm(t, append([]string{"lint", "--strict", "charts/sluice"}, set...)...)
	}
	// The overflow node alone: none of the scheduler's objects.
	onlyNode := []string{"--set", "scheduler.enabled=false,overflowNode.enabled=true"}
	harness.Helm(t, append([]string{"lint", "--strict", "charts/sluice"}, onlyNode...)...)
	var kinds []string
	for _, o := range harness.DecodeYAML(t, harness.Helm(t, append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system"}, onlyNode...)...)) {
		if strings.HasPrefix(o.GetName(), "sluice-scheduler") {
			t.Errorf("scheduler.enabled=false renders %s %s", o.GetKind(), o.GetName())
		}
		if strings.HasPrefix(o.GetName(), "sluice-overflow-node") {
			kinds = append(kinds, o.GetKind())
		}
	}
	if !slices.Contains(kinds, "Deployment") {
		t.Errorf("scheduler.enabled=false, overflowNode.enabled=true renders the overflow node's %v, want its Deployment", kinds)
	}
}

// TestHelmChartMatchesManifests keeps the chart and the kustomize
// manifests from drifting: the chart rendered with its defaults is the
// kustomization's objects (but the Namespace, which Helm creates), and with
// every part on, also those of manifests/overflow-node and
// manifests/monitoring, each with the same content; Helm's labels,
// pod-template annotations and kustomize's ConfigMap name hashes aside.
// Its CRDs are the manifests' own, byte for byte.
func TestHelmChartMatchesManifests(t *testing.T) {
	root := harness.ModuleRoot(t)
	kustomized := func(dirs ...string) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, d := range dirs {
			for _, o := range harness.Kustomize(t, filepath.Join(root, d)) {
				if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
					continue
				}
				out[objectKey(o)] = normalized(t, o)
			}
		}
		return out
	}
	rendered := func(set ...string) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range harness.DecodeYAML(t, harness.Helm(t, append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system"}, set...)...)) {
			out[objectKey(o)] = normalized(t, o)
		}
		return out
	}
	for _, c := range []struct {
		name string
		want map[string]*unstructured.Unstructured
		got  map[string]*unstructured.Unstructured
	}{
		{"defaults", kustomized("manifests"), rendered()},
		{"every part on", kustomized("manifests", "manifests/overflow-node", "manifests/monitoring"), rendered(allToggles...)},
	} {
		for _, key := range sortedKeys(c.want) {
			got, ok := c.got[key]
			if !ok {
				t.Errorf("%s: the chart does not render %s", c.name, key)
				continue
			}
			if diff := cmp.Diff(c.want[key].Object, got.Object); diff != "" {
				t.Errorf("%s: %s differs between manifests/ and the chart (-manifests +chart):\n%s", c.name, key, diff)
			}
		}
		for _, key := range sortedKeys(c.got) {
			if _, ok := c.want[key]; !ok {
				t.Errorf("%s: the chart renders %s, which manifests/ does not have", c.name, key)
			}
		}
	}
	crds, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in manifests/crds: %v", err)
	}
	for _, f := range crds {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "charts", "sluice", "crds", filepath.Base(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("charts/sluice/crds/%s is not manifests/crds/%s byte for byte (%v)", filepath.Base(f), filepath.Base(f), err)
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), hashSuffix.ReplaceAllString(o.GetName(), ""))
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// hashSuffix is the content hash kustomize appends to generated
// ConfigMaps' names.
var hashSuffix = regexp.MustCompile(`-[a-z0-9]{10}$`)

// normalized is o without what may differ between the two: labels and
// annotations (Helm's, kustomize's), pod-template annotations, generated
// ConfigMap names; ConfigMap data that is YAML or JSON is compared parsed.
func normalized(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	o = o.DeepCopy()
	unstructured.RemoveNestedField(o.Object, "metadata", "labels")
	unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
	unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
	o.SetName(hashSuffix.ReplaceAllString(o.GetName(), ""))
	if o.GetKind() == "Deployment" {
		unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "labels")
		volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
				if name, ok := cm["name"].(string); ok {
					cm["name"] = hashSuffix.ReplaceAllString(name, "")
				}
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, volumes, "spec", "template", "spec", "volumes")
	}
	if o.GetKind() == "ConfigMap" {
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		parsed := map[string]any{}
		for k, v := range data {
			var value any
			var err error
			if strings.HasSuffix(k, ".json") {
				err = json.Unmarshal([]byte(v), &value)
			} else {
				err = yaml.Unmarshal([]byte(v), &value)
			}
			if err != nil {
				t.Fatalf("ConfigMap %s key %s: %v", o.GetName(), k, err)
			}
			parsed[k] = value
		}
		o.Object["data"] = parsed
	}
	return o
}
