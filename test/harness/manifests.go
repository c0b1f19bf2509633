// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize builds a kustomization directory (kubectl apply -k) into
// objects.
func Kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	data, err := rendered.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return DecodeYAML(t, data)
}

// DecodeYAML splits a multi-document YAML stream into objects.
func DecodeYAML(t testing.TB, data []byte) []*unstructured.Unstructured {
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

// CreateObjects creates namespaces and CRDs first (waiting until CRDs are
// served), then everything else, with strict field validation. Namespaces
// it creates belong to the test (see OwnNamespace); cluster-scoped objects
// stay.
func CreateObjects(t testing.TB, cp *ControlPlane, objs []*unstructured.Unstructured) {
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
			if o.GetKind() == "Namespace" {
				// The test owns the namespace: it is deleted, with
				// everything created in it, when the test ends.
				OwnNamespace(t, cp.Client, o.GetName())
			}
			if o.GetKind() == "CustomResourceDefinition" {
				waitEstablished(t, dyn, o.GetName())
			}
		}
	}
}

func waitEstablished(t testing.TB, dyn dynamic.Interface, name string) {
	t.Helper()
	gvr := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
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
