// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// TestMetricsNeedAuthorizedToken runs the real sluice-overflow-node and
// scrapes its /metrics over TLS as Prometheus would, with a ServiceAccount
// token: refused without a token (401), refused for a ServiceAccount
// without the shipped monitoring RBAC (403), served to the one
// manifests/monitoring/rbac.yaml binds, with the node's metrics in it.
// /healthz and /readyz answer anyone, for kubelet's probes.
func TestMetricsNeedAuthorizedToken(t *testing.T) {
	cp := harness.Shared(t)
	ctx := context.Background()
	ns := harness.NewNamespace(t, cp.Client)
	harness.OwnNamespace(t, cp.Client, createNamespace(t, cp, "monitoring"))
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "8"}})
	defer srv.Close()
	name := "ovf-metrics-" + harness.NewNameSuffix()
	deleteNodeAtEnd(t, cp, name)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cfg := &overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: name,
		Providers: []overflownode.ProviderConfig{{Name: "cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: srv.URL}}}}
	startNodeProcess(t, cp, cfg, "--metrics-bind-address="+addr)

	// Prometheus' ServiceAccount, named as the shipped monitoring RBAC
	// expects, and a ServiceAccount nobody granted /metrics.
	for _, sa := range []struct{ ns, name string }{{"monitoring", "prometheus-k8s"}, {ns, "stranger"}} {
		if _, err := cp.Client.CoreV1().ServiceAccounts(sa.ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var rbac []*unstructured.Unstructured
	for _, o := range harness.Kustomize(t, filepath.Join(harness.ModuleRoot(t), "manifests", "monitoring")) {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" {
			rbac = append(rbac, o)
		}
	}
	if len(rbac) != 2 {
		t.Fatalf("manifests/monitoring has %d ClusterRoles and ClusterRoleBindings, want a ClusterRole and its binding", len(rbac))
	}
	harness.CreateObjects(t, cp, rbac)
	t.Cleanup(func() {
		for _, o := range rbac {
			if o.GetKind() == "ClusterRole" {
				_ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			} else {
				_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			}
		}
	})
	token := func(ns, sa string) string {
		tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s/%s: %v", ns, sa, err)
		}
		return tr.Status.Token
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the node's self-signed serving certificate
	}}
	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s over TLS: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(path, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s, want 200 (kubelet's probes carry none)", path, code, body)
		}
	}
	if code, body := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d %.200s, want 401", code, body)
	}
	if code, body := get("/metrics", token(ns, "stranger")); code != http.StatusForbidden {
		t.Errorf("GET /metrics as a ServiceAccount without the monitoring RBAC: %d %.200s, want 403", code, body)
	}
	prometheus := token("monitoring", "prometheus-k8s")
	// RBAC reaches the authorizer's cache within seconds: wait on the
	// answer, not a sleep.
	var code int
	var body string
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		code, body = get("/metrics", prometheus)
		return code == http.StatusOK, nil
	}, func() string {
		return fmt.Sprintf("GET /metrics as monitoring/prometheus-k8s: %d %.300s, want 200", code, body)
	})
	for _, want := range []string{"sluice_overflow_node_provider_healthy{provider=\"cloud\"} 1", "sluice_overflow_node_reconcile_duration_seconds_count"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// createNamespace creates a namespace of a fixed name (one a manifest
// names).
func createNamespace(t *testing.T, cp *harness.ControlPlane, name string) string {
	t.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}
