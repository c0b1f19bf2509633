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

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestOlderClaimCRDStopsBothBinaries: with an older release's
// ResearchClaim CRD installed (no spec.makeBeforeBreak, which the
// apiserver would then drop from every claim: make-before-break turned
// break-before-make), the shipped scheduler and overflow node, run as
// their ServiceAccounts, stop at start-up naming the missing field and
// the fix.
func TestOlderClaimCRDStopsBothBinaries(t *testing.T) {
	root := harness.ModuleRoot(t)
	objs := harness.Kustomize(t, filepath.Join(root, "manifests"))
	objs = append(objs, harness.Kustomize(t, filepath.Join(root, "manifests", "overflow-node"))...)
	older := false
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" || o.GetName() != "researchclaims.claims.sluice.dev" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for i, v := range versions {
			v := v.(map[string]any)
			unstructured.RemoveNestedField(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "makeBeforeBreak")
			versions[i] = v
			older = true
		}
		if err := unstructured.SetNestedSlice(o.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
	}
	if !older {
		t.Fatal("no ResearchClaim CRD in manifests/")
	}
	cp := harness.StartStockControlPlane(t)
	harness.CreateObjects(t, cp, objs)

	stops := func(p *harness.Process) {
		t.Helper()
		select {
		case <-p.Exited():
		case <-time.After(harness.DefaultTimeout):
			t.Fatalf("%s still runs after %v with an older ResearchClaim CRD; it should stop at start-up and say why", p, harness.DefaultTimeout)
		}
		log, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"researchclaims.claims.sluice.dev", "spec.makeBeforeBreak", "manifests/crds"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("%s's start-up error does not name %q:\n%s", p.Name, want, tailString(string(log), 10))
			}
		}
	}

	bin, args := shippedScheduler(t, cp, objs)
	stops(harness.StartProcess(t, "sluice-scheduler", bin, args...))

	dir := t.TempDir()
	kubeconfig, err := cp.KubeconfigAs(dir, "system:serviceaccount:sluice-system:sluice-overflow-node",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: "sluice-overflow",
		Providers: []overflownode.ProviderConfig{{Name: "cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: "http://127.0.0.1:9"}}}}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "overflow-node.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	stops(harness.StartProcess(t, "sluice-overflow-node", harness.Binary(t, "sluice-overflow-node"),
		"--config="+file, "--kubeconfig="+kubeconfig, "--metrics-bind-address=", "--v=2"))
}
