// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package crdcheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func shipped(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "crds", "claims.sluice.dev_researchclaims.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// TestShippedCRDHasEveryField: the shipped CRD passes; one without a
// field (an older release's) is refused, naming the field and the fix.
func TestShippedCRDHasEveryField(t *testing.T) {
	crd := shipped(t)
	if err := CheckServed(crd, ResearchClaims()); err != nil {
		t.Fatalf("the shipped CRD: %v", err)
	}
	if got := len(Missing(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, ResearchClaims().Type)); got != 0 {
		t.Fatalf("the shipped CRD misses %d fields", got)
	}

	old := crd.DeepCopy()
	spec := old.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	delete(spec.Properties, "makeBeforeBreak")
	old.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	status := old.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	evicted := status.Properties["evicted"]
	delete(evicted.Items.Schema.Properties, "time")
	status.Properties["evicted"] = evicted
	old.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	err := CheckServed(old, ResearchClaims())
	if err == nil || !strings.Contains(err.Error(), "spec.makeBeforeBreak, status.evicted[].time") || !strings.Contains(err.Error(), "manifests/crds") {
		t.Errorf("an older CRD: %v, want the missing fields and the fix named", err)
	}

	other := crd.DeepCopy()
	other.Spec.Versions[0].Name = "v1alpha0"
	if err := CheckServed(other, ResearchClaims()); err == nil || !strings.Contains(err.Error(), "has no version v1alpha1") {
		t.Errorf("a CRD without the version: %v", err)
	}
}

// TestMissingWalksTheType: inline fields, pointers, slices, foreign
// leaves and preserved-unknown subtrees.
func TestMissingWalksTheType(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type obj struct {
		embedded `json:",inline"`
		P        *inner  `json:"p"`
		L        []inner `json:"l"`
		Skip     string  `json:"-"`
		Raw      []byte  `json:"raw"`
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	keep := true
	s := &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"e":   str,
		"p":   {Properties: map[string]apiextensionsv1.JSONSchemaProps{}},
		"l":   {Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: &keep}}},
		"raw": str,
	}}
	if got, want := Missing(s, reflect.TypeFor[obj]()), []string{"p.a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Missing = %v, want %v", got, want)
	}
}
