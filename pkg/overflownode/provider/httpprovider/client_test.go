// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package httpprovider_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/httpprovider"
	"github.com/sluice-sched/sluice/test/providerserver"
)

func pod(name, uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: name, UID: types.UID("uid-" + uid), Labels: map[string]string{"app": "llm"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "server", Image: "vllm/vllm-openai:v0.11",
			Env: []v1.EnvVar{{Name: "MODEL", Value: "llama"}, {Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				Limits:   v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
			},
		}}},
	}
}

func newClient(t *testing.T, srv *providerserver.Server, token string) *httpprovider.Client {
	t.Helper()
	opts := httpprovider.Options{URL: srv.URL + "/", Node: "sluice-overflow"}
	if strings.HasPrefix(srv.URL, "https:") {
		ca, err := srv.WriteCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		opts.CAFile = ca
	}
	if token != "" {
		opts.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(opts.TokenFile, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := httpprovider.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLifecycle(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	srv := providerserver.Start(providerserver.Options{Token: "s3cret", TLS: true, Capacity: map[string]string{"nvidia.com/gpu": "16"}, StartDelay: 50 * time.Millisecond, Clock: clk})
	defer srv.Close()
	c := newClient(t, srv, "s3cret")
	ctx := context.Background()

	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	capacity, err := c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := capacity["nvidia.com/gpu"]; got.Value() != 16 {
		t.Errorf("capacity nvidia.com/gpu = %s, want 16", got.String())
	}
	p := pod("llm-0", "a")
	id := provider.IDFor(p.UID)
	if err := c.Create(ctx, id, p, provider.Refs{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Idempotent: a repeated create (after a restart) is not an error and
	// makes no second workload.
	if err := c.Create(ctx, id, p, provider.Refs{}); err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if srv.Creates() != 1 {
		t.Errorf("provider created %d workloads, want 1", srv.Creates())
	}
	req, _ := srv.Request(id)
	wantEnv := []httpprovider.EnvVar{{Name: "MODEL", Value: "llama"}, {Name: "POD", Value: "llm-0"}}
	if diff := cmp.Diff(wantEnv, req.Containers[0].Env); diff != "" {
		t.Errorf("env sent (-want,+got):\n%s", diff)
	}
	if req.Pod != (provider.PodRef{Namespace: "serve", Name: "llm-0", UID: p.UID}) {
		t.Errorf("pod ref sent = %+v", req.Pod)
	}
	w, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if w.Phase != provider.Pending || w.Ready {
		t.Errorf("new workload: phase %s ready %v, want Pending, not ready", w.Phase, w.Ready)
	}
	clk.SetTime(clk.Now().Add(60 * time.Millisecond))
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Phase != provider.Running || !list[0].Ready {
		t.Fatalf("List = %+v, want one Running, Ready workload", list)
	}
	if err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, id); err != nil {
		t.Errorf("deleting a deleted workload: %v, want nil", err)
	}
	if _, err := c.Get(ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Get after delete: %v, want ErrNotFound", err)
	}
}

func TestErrors(t *testing.T) {
	srv := providerserver.Start(providerserver.Options{Token: "s3cret", TLS: true, Capacity: map[string]string{"nvidia.com/gpu": "16"}})
	defer srv.Close()
	ctx := context.Background()

	wrong := newClient(t, srv, "tok-XYZ789")
	if err := wrong.Health(ctx); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "XYZ789") {
		t.Errorf("wrong token: %v, want an HTTP 401 error that does not echo the token", err)
	}

	c := newClient(t, srv, "s3cret")
	srv.SetHealthy(false)
	if err := c.Health(ctx); err == nil || !strings.Contains(err.Error(), "maintenance") {
		t.Errorf("unhealthy provider: %v, want its message", err)
	}
	srv.SetHealthy(true)

	bad := pod("llm-1", "b")
	bad.Spec.Containers[0].Image = ""
	if err := c.Create(ctx, provider.IDFor(bad.UID), bad, provider.Refs{}); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("422: %v, want ErrUnsupported", err)
	}

	withVolume := pod("llm-2", "c")
	withVolume.Spec.Volumes = []v1.Volume{{Name: "weights", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "w"}}}}
	err := c.Create(ctx, provider.IDFor(withVolume.UID), withVolume, provider.Refs{})
	if !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "spec.volumes[0] (weights)") {
		t.Errorf("PVC volume: %v, want ErrUnsupported naming spec.volumes[0] (weights)", err)
	}
	secretEnv := pod("llm-3", "d")
	secretEnv.Spec.Containers[0].Env = append(secretEnv.Spec.Containers[0].Env, v1.EnvVar{Name: "KEY", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}})
	if err := c.Create(ctx, provider.IDFor(secretEnv.UID), secretEnv, provider.Refs{}); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "env KEY") {
		t.Errorf("secret env: %v, want ErrUnsupported naming env KEY", err)
	}

	if _, err := httpprovider.New(httpprovider.Options{URL: "ftp://x"}); err == nil {
		t.Error("ftp URL accepted")
	}
}

// TestOpenAPIDocument keeps docs/overflow-http-provider.yaml and the Go
// contract in step: the same operations, and every JSON field the client
// sends or reads is in the document's schema.
func TestOpenAPIDocument(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "overflow-http-provider.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, methods := range doc.Paths {
		for m := range methods {
			if m != "parameters" {
				ops = append(ops, strings.ToUpper(m)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	want := []string{"DELETE /v1/workloads/{id}", "GET /v1/capacity", "GET /v1/health", "GET /v1/usage", "GET /v1/workloads", "GET /v1/workloads/{id}", "GET /v1/workloads/{id}/logs", "PUT /v1/workloads/{id}", "PUT /v1/workloads/{id}/pod"}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("operations (-client,+document):\n%s", diff)
	}
	for schema, typ := range map[string]reflect.Type{
		"CreateRequest":  reflect.TypeFor[httpprovider.CreateRequest](),
		"Container":      reflect.TypeFor[httpprovider.Container](),
		"Workload":       reflect.TypeFor[provider.Workload](),
		"PodRef":         reflect.TypeFor[provider.PodRef](),
		"Health":         reflect.TypeFor[httpprovider.Health](),
		"Capacity":       reflect.TypeFor[httpprovider.Capacity](),
		"WorkloadList":   reflect.TypeFor[httpprovider.WorkloadList](),
		"Error":          reflect.TypeFor[httpprovider.Error](),
		"UsageList":      reflect.TypeFor[httpprovider.UsageList](),
		"WorkloadUsage":  reflect.TypeFor[httpprovider.WorkloadUsage](),
		"ContainerUsage": reflect.TypeFor[httpprovider.ContainerUsage](),
		"Object":         reflect.TypeFor[httpprovider.Object](),
		"Volume":         reflect.TypeFor[httpprovider.Volume](),
		"ObjectSource":   reflect.TypeFor[httpprovider.ObjectSource](),
		"KeyRef":         reflect.TypeFor[httpprovider.KeyRef](),
		"ObjectRef":      reflect.TypeFor[httpprovider.ObjectRef](),
	} {
		props := doc.Components.Schemas[schema].Properties
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if _, ok := props[name]; !ok {
				t.Errorf("schema %s has no property %q (Go field %s.%s)", schema, name, typ.Name(), typ.Field(i).Name)
			}
		}
	}
}

// readsHome makes p read Secret hf (env HF_TOKEN, and envFrom with a
// prefix) and ConfigMap model (a volume of one item).
func readsHome(p *v1.Pod) {
	p.Spec.Volumes = []v1.Volume{{Name: "model", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "model"}, Items: []v1.KeyToPath{{Key: "config.json", Path: "model.json"}}}}}}
	c := &p.Spec.Containers[0]
	c.Env = append(c.Env, v1.EnvVar{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}})
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "HF_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "model", MountPath: "/etc/model", ReadOnly: true}}
}

func homeRefs(token string) provider.Refs {
	return provider.Refs{
		Secrets:    map[string]*v1.Secret{"hf": {ObjectMeta: metav1.ObjectMeta{Name: "hf"}, Data: map[string][]byte{"token": []byte(token)}}},
		ConfigMaps: map[string]*v1.ConfigMap{"model": {ObjectMeta: metav1.ObjectMeta{Name: "model"}, Data: map[string]string{"config.json": `{"model":"llama"}`}}},
	}
}

// TestSecretsOverTLS: over https the request carries the Secrets and
// ConfigMaps a pod reads, the provider resolves the pod's env and files
// from them, and a repeated PUT replaces them; over plain http the client
// says it carries none and refuses to send them.
func TestSecretsOverTLS(t *testing.T) {
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}, TLS: true})
	defer srv.Close()
	ca, err := srv.WriteCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := httpprovider.New(httpprovider.Options{URL: srv.URL, CAFile: ca, Node: "sluice-overflow", Secrets: true, ConfigMaps: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Carries(); !got.Secrets || !got.ConfigMaps {
		t.Errorf("over https the client carries %+v, want Secrets and ConfigMaps", got)
	}
	ctx := context.Background()
	p := pod("llm-0", "s")
	readsHome(p)
	id := provider.IDFor(p.UID)
	if err := c.Create(ctx, id, p, homeRefs("one")); err != nil {
		t.Fatalf("Create over https: %v", err)
	}
	env, ok := srv.Env(id, "server")
	want := map[string]string{"MODEL": "llama", "POD": "llm-0", "HF_TOKEN": "one", "HF_token": "one"}
	if diff := cmp.Diff(want, env); !ok || diff != "" {
		t.Errorf("the remote environment (-want,+got):\n%s", diff)
	}
	if b, ok := srv.File(id, "model", "model.json"); !ok || string(b) != `{"model":"llama"}` {
		t.Errorf("the remote file model.json = %q (%v), want the ConfigMap's config.json", b, ok)
	}
	if err := c.UpdateRefs(ctx, id, p, homeRefs("two")); err != nil {
		t.Fatalf("UpdateRefs with a changed Secret: %v", err)
	}
	if env, _ := srv.Env(id, "server"); env["HF_TOKEN"] != "two" {
		t.Errorf("after the change the remote HF_TOKEN is the old one")
	}
	if err := c.Create(ctx, provider.IDFor("uid-x"), pod("llm-x", "x"), provider.Refs{}); err != nil {
		t.Errorf("a pod without Secrets over https: %v", err)
	}
	missing := pod("llm-1", "m")
	readsHome(missing)
	if err := c.Create(ctx, provider.IDFor(missing.UID), missing, provider.Refs{}); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "is not in the request") {
		t.Errorf("a pod whose Secret and ConfigMap are not in the request: %v, want a 422 saying so", err)
	}

	gone := pod("llm-9", "g")
	readsHome(gone)
	if err := c.UpdateRefs(ctx, provider.IDFor(gone.UID), gone, homeRefs("one")); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("UpdateRefs of a workload that is gone: %v, want ErrNotFound", err)
	}
	for _, id := range srv.IDs() {
		if id == provider.IDFor(gone.UID) {
			t.Errorf("UpdateRefs created a workload that was gone")
		}
	}
	kept, err := httpprovider.New(httpprovider.Options{URL: srv.URL, CAFile: ca, Node: "sluice-overflow", ConfigMaps: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := kept.Carries(); got.Secrets || !got.ConfigMaps {
		t.Errorf("with Secrets off the client carries %+v, want ConfigMaps only", got)
	}

	// A redirect (here to plain http) is not followed: the PUT with the
	// Secrets is not replayed.
	plain := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}})
	defer plain.Close()
	redirect := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	rc := carryingClient(t, redirect)
	if err := rc.Create(ctx, id, p, homeRefs("one")); err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("a redirected PUT: %v, want the 307 as an error", err)
	}
	if len(plain.IDs()) != 0 {
		t.Errorf("the redirect was followed: the plain http server got the workload")
	}
	h := newClient(t, plain, "")
	if got := h.Carries(); got.Secrets || got.ConfigMaps {
		t.Errorf("over plain http the client carries %+v, want no Secrets or ConfigMaps", got)
	}
	if err := h.Create(ctx, id, p, homeRefs("one")); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Secrets over plain http: %v, want ErrUnsupported", err)
	}
	if len(plain.IDs()) != 0 {
		t.Errorf("a workload reading Secrets was created over plain http")
	}
}

// TestAddressesAndLogs: a served workload reports the loopback address it
// answers at, and its log (tail, and 404 for a workload that is gone) is
// read through the contract's logs endpoint.
func TestAddressesAndLogs(t *testing.T) {
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}, Serve: true, ServeAddresses: []string{"127.0.0.1"}})
	defer srv.Close()
	c := newClient(t, srv, "")
	ctx := context.Background()
	p := pod("llm-0", "a")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: int32(port)}}
	id := provider.IDFor(p.UID)
	if err := c.Create(ctx, id, p, provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Validate(); err != nil || len(w.Addresses) != 1 {
		t.Fatalf("workload %+v (%v), want one address", w, err)
	}
	// Loopback serves this test, but is no pod IP.
	if err := provider.UsableAddress(w.Addresses[0]); err == nil {
		t.Errorf("address %s usable as a pod IP, want loopback refused", w.Addresses[0])
	}
	resp, err := http.Get("http://" + net.JoinHostPort(w.Addresses[0], strconv.Itoa(port)) + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	read := func(o provider.LogOptions) string {
		t.Helper()
		rc, err := c.Logs(ctx, id, "server", o)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		data, _ := io.ReadAll(rc)
		return string(data)
	}
	if got := read(provider.LogOptions{}); !strings.Contains(got, "container server started") || !strings.Contains(got, "GET /v1/completions") {
		t.Errorf("log = %q, want the start and the request", got)
	}
	if got := read(provider.LogOptions{Tail: 1}); strings.Count(got, "\n") != 1 || !strings.Contains(got, "GET /v1/completions") {
		t.Errorf("log, last line = %q, want the request only", got)
	}
	if _, err := c.Logs(ctx, "sluice-gone", "server", provider.LogOptions{}); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("log of a missing workload: %v, want ErrNotFound", err)
	}
}

// TestUpdateRefsNeverRecreates: a workload that vanishes between
// UpdateRefs' read and its PUT is not started again: the PUT says
// "If-Match: *" and the provider answers 412.
func TestUpdateRefsNeverRecreates(t *testing.T) {
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}})
	defer srv.Close()
	c := newClient(t, srv, "")
	ctx := context.Background()
	p := pod("llm-0", "a")
	id := provider.IDFor(p.UID)
	if err := c.Create(ctx, id, p, provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	// The workload vanishes right after the provider answers the read.
	srv.VanishAfterRead(id)
	if err := c.UpdateRefs(ctx, id, p, provider.Refs{}); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("UpdateRefs of a workload that vanished meanwhile: %v, want ErrNotFound", err)
	}
	if ids := srv.IDs(); len(ids) != 0 {
		t.Errorf("UpdateRefs started %v again", ids)
	}
}

// TestAdopt: PUT /v1/workloads/{id}/pod re-points a warm workload at its
// adopter, which the provider reports from then on, with the time it was
// created; a missing workload is ErrNotFound.
func TestAdopt(t *testing.T) {
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}})
	defer srv.Close()
	c := newClient(t, srv, "")
	ctx := context.Background()
	victim := pod("llm-0", "a")
	id := provider.WarmIDFor(victim.UID)
	if err := c.Create(ctx, id, victim, provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	adopter := provider.PodRef{Namespace: "serve", Name: "llm-new", UID: "uid-new"}
	if err := c.Adopt(ctx, id, adopter); err != nil {
		t.Fatal(err)
	}
	w, err := c.Get(ctx, id)
	if err != nil || w.Pod != adopter || w.CreatedAt == nil {
		t.Errorf("after Adopt: %+v, %v; want pod %v and createdAt", w, err, adopter)
	}
	if err := c.Adopt(ctx, provider.WarmIDFor("nope"), adopter); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Adopt of a missing workload = %v, want ErrNotFound", err)
	}
	if srv.Adoptions() != 1 || srv.Creates() != 1 {
		t.Errorf("server saw %d adoptions and %d creates, want 1 and 1", srv.Adoptions(), srv.Creates())
	}
}

// TestTokenOnlyOverHTTPS: a client with a bearer token and a plain http
// URL is refused when it is built, naming the setting; the token would
// travel in clear on every request.
func TestTokenOnlyOverHTTPS(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := httpprovider.New(httpprovider.Options{URL: "http://gpu-cloud.example/sluice", TokenFile: token, Node: "sluice-overflow"})
	if err == nil || !strings.Contains(err.Error(), "https") || !strings.Contains(err.Error(), "tokenFile") {
		t.Errorf("a token over plain http: %v, want it refused, naming tokenFile and https", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error echoes the token: %v", err)
	}
}

// TestProviderErrorsEchoNoRequest: a provider whose error answer repeats
// the request (a common framework default) must not put the pod's Secret
// values, nor a long body, into the error the node turns into an Event.
func TestProviderErrorsEchoNoRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		echo func(body []byte) []byte
	}{
		{"JSON error", func(body []byte) []byte {
			out, _ := json.Marshal(map[string]string{"error": "invalid workload: " + string(body)})
			return out
		}},
		{"plain text", func(body []byte) []byte { return append([]byte("bad request: "), body...) }},
		{"a Secret's value, decoded", func([]byte) []byte { return []byte(`{"error":"the token hf_TOPSECRET42 is not valid here"}`) }},
		{"a Secret's value past the cut", func([]byte) []byte {
			return []byte(`{"error":"` + strings.Repeat("x", 300) + ` token hf_TOPSECRET42"}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(tc.echo(body))
			}))
			defer srv.Close()
			c := carryingClient(t, srv)
			p := pod("llm-0", "e")
			readsHome(p)
			err := c.Create(context.Background(), provider.IDFor(p.UID), p, homeRefs("hf_TOPSECRET42"))
			if err == nil || !strings.Contains(err.Error(), "400") {
				t.Fatalf("Create: %v, want the 400", err)
			}
			if strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(err.Error(), "llama") {
				t.Errorf("the error repeats the request: %v", err)
			}
			if len(err.Error()) > 400 {
				t.Errorf("the error is %d bytes, want it short: %v", len(err.Error()), err)
			}
		})
	}
}

// carryingClient is a client of srv (https, trusting its certificate)
// that carries Secrets and ConfigMaps.
func carryingClient(t *testing.T, srv *httptest.Server) *httpprovider.Client {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := httpprovider.New(httpprovider.Options{URL: srv.URL, CAFile: ca, Node: "sluice-overflow", Secrets: true, ConfigMaps: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProviderErrorsAreShown: a provider's message that repeats nothing
// the request carried is shown (cut), naming what it names (the image).
func TestProviderErrorsAreShown(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"image vllm/vllm-openai:v0.11 is not in our registry mirror"}`))
	}))
	defer srv.Close()
	p := pod("llm-0", "e")
	readsHome(p)
	err := carryingClient(t, srv).Create(context.Background(), provider.IDFor(p.UID), p, homeRefs("hf_TOPSECRET42"))
	if err == nil || !strings.Contains(err.Error(), "image vllm/vllm-openai:v0.11 is not in our registry mirror") {
		t.Errorf("Create: %v, want the provider's message", err)
	}
}

// TestUsage: a provider's measure is read as quantities; one that serves
// no /v1/usage (404, 501) measures nothing (ErrUnsupported), and an
// invalid item fails the whole answer.
func TestUsage(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}, Clock: clk})
	defer srv.Close()
	c := newClient(t, srv, "")
	ctx := context.Background()
	if err := c.Create(ctx, provider.IDFor("uid-a"), pod("a", "a"), provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Usage(ctx); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("usage of a provider that measures nothing: %v, want ErrUnsupported", err)
	}
	srv.SetUsage("1500m", "2Gi")
	got, err := c.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != provider.IDFor("uid-a") || !got[0].Time.Equal(clk.Now().UTC()) || len(got[0].Containers) != 1 ||
		got[0].Containers[0].Name != "server" || got[0].Containers[0].CPU.MilliValue() != 1500 || got[0].Containers[0].Memory.Value() != 2<<30 {
		t.Errorf("usage = %+v, want container server at 1500m and 2Gi", got)
	}

	for name, answer := range map[string]func(http.ResponseWriter){
		"404": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"no such path"}`))
		},
		"bad": func(w http.ResponseWriter) {
			_, _ = w.Write([]byte(`{"items":[{"id":"sluice-x","timestamp":"2026-12-07T10:00:00Z","containers":[{"name":"c","cpu":"lots","memory":"1Gi"}]}]}`))
		},
	} {
		raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w) }))
		c, err := httpprovider.New(httpprovider.Options{URL: raw.URL, Node: "n"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Usage(ctx)
		raw.Close()
		switch name {
		case "404":
			if !errors.Is(err, provider.ErrUnsupported) {
				t.Errorf("usage answered 404: %v, want ErrUnsupported", err)
			}
		case "bad":
			if err == nil || errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), `cpu "lots"`) {
				t.Errorf("usage with an invalid cpu: %v, want an error naming it", err)
			}
		}
	}
}
