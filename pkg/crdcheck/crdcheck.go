// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package crdcheck stops a binary at start-up when the cluster serves an
// older schema of a CRD it writes: the apiserver prunes every field its
// schema does not know, so a claim written by a newer sluice would lose
// fields silently (a make-before-break claim turned break-before-make).
// The check walks the Go type the binary writes and looks each JSON field
// up in the served version's schema.
package crdcheck

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
)

// CRD is a CRD a binary writes: its name, the version it writes, and
// the Go type of its objects.
type CRD struct {
	Name    string
	Version string
	Type    reflect.Type
}

// ResearchClaims is the ResearchClaim CRD, written by the scheduler and
// read by the overflow node.
func ResearchClaims() CRD {
	return CRD{Name: v1alpha1.Resource.Resource + "." + v1alpha1.Resource.Group, Version: v1alpha1.Resource.Version,
		Type: reflect.TypeFor[v1alpha1.ResearchClaim]()}
}

// Check reads crd from the cluster and returns an error naming the
// fields its served schema lacks and the fix. A CRD that is not installed
// passes (claims.Store checks it again once it is served); one
// that cannot be read is an error naming the permission.
func Check(ctx context.Context, dyn dynamic.Interface, crd CRD) error {
	// An apiserver that does not answer (a control-plane upgrade) is
	// asked again for a while; only a refusal or an older schema stops.
	var u *unstructured.Unstructured
	var err error
	for delay := time.Second; ; delay *= 2 {
		u, err = dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).Get(ctx, crd.Name, metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || delay > checkPatience {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reading CRD %s to check its schema: %w", crd.Name, err)
		case <-time.After(delay):
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading CRD %s to check its schema: %w (the shipped RBAC grants get of customresourcedefinitions %s)", crd.Name, err, crd.Name)
	case err != nil:
		return fmt.Errorf("reading CRD %s to check its schema: %w", crd.Name, err)
	}
	var obj apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		return fmt.Errorf("reading CRD %s to check its schema: %w", crd.Name, err)
	}
	return CheckServed(&obj, crd)
}

// checkPatience bounds how long Check asks an apiserver that does not
// answer (1+2+...+32 s).
const checkPatience = 32 * time.Second

// CheckServed checks a CRD object.
func CheckServed(obj *apiextensionsv1.CustomResourceDefinition, crd CRD) error {
	fix := "apply this release's manifests/crds (`kubectl apply --server-side -f manifests/crds/`; with Helm, see the README's upgrade section) and restart"
	for _, v := range obj.Spec.Versions {
		if v.Name != crd.Version {
			continue
		}
		if !v.Served {
			return fmt.Errorf("CRD %s does not serve %s, which this binary writes: %s", crd.Name, crd.Version, fix)
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("CRD %s version %s has no schema: %s", crd.Name, crd.Version, fix)
		}
		if missing := Missing(v.Schema.OpenAPIV3Schema, crd.Type); len(missing) > 0 {
			return fmt.Errorf("CRD %s version %s is older than this binary: its schema lacks %s, which the apiserver would drop from every object written: %s",
				crd.Name, crd.Version, strings.Join(missing, ", "), fix)
		}
		return nil
	}
	return fmt.Errorf("CRD %s has no version %s, which this binary writes: %s", crd.Name, crd.Version, fix)
}

// Missing lists the JSON paths of typ's fields that schema does not
// have, sorted. Object metadata and types of other modules (times,
// quantities) are leaves; a schema that preserves unknown fields keeps
// everything below it.
func Missing(schema *apiextensionsv1.JSONSchemaProps, typ reflect.Type) []string {
	var out []string
	walk(schema, typ, "", &out)
	sort.Strings(out)
	return out
}

func walk(s *apiextensionsv1.JSONSchemaProps, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return // []byte: a string
		}
		if s.Items == nil || s.Items.Schema == nil {
			*out = append(*out, path+"[]")
			return
		}
		walk(s.Items.Schema, t.Elem(), path+"[]", out)
	case reflect.Struct:
		if !ours(t) {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, inline := jsonName(f)
			switch {
			case name == "-", !f.IsExported():
				continue
			case inline:
				walk(s, f.Type, path, out)
				continue
			case path == "" && (name == "metadata" || name == "apiVersion" || name == "kind"):
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			prop, ok := s.Properties[name]
			if !ok {
				*out = append(*out, p)
				continue
			}
			walk(&prop, f.Type, p, out)
		}
	}
}

// ours: a type of this module (its fields are in the schema); others
// (metav1.Time, resource.Quantity, types.UID) are leaves.
func ours(t reflect.Type) bool {
	return strings.HasPrefix(t.PkgPath(), "github.com/sluice-sched/sluice/")
}

func jsonName(f reflect.StructField) (string, bool) {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		if f.Anonymous {
			return "", true
		}
		return f.Name, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
		return "", true
	}
	if name == "" {
		return f.Name, false
	}
	return name, false
}
