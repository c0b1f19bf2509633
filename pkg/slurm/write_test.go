// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeUpdates: drains and resumes go to slurmrestd as 24.11 takes them
// (POST .../node/{name}, the state as a list), and what it answers is
// read: 200 is done, a 500 with errors (24.11's answer to an unknown node,
// from ../shared/data/slurm/live-24.11/node-update-unknown-node-response-v0.0.42.json,
// meta left out) names them, a 200 with errors is an error too.
func TestNodeUpdates(t *testing.T) {
	var got []string
	status, answer := http.StatusOK, `{"errors":[],"warnings":[]}`
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body)+" "+r.Header.Get("X-SLURM-USER-TOKEN"))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.42", User: "root", TokenFile: writeToken(t, t.TempDir(), "jwt")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.DrainNode(ctx, "gpu06", "sluice: cordoned in Kubernetes"); err != nil {
		t.Fatal(err)
	}
	if err := c.ResumeNode(ctx, "gpu06"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`POST /slurm/v0.0.42/node/gpu06 {"state":["DRAIN"],"reason":"sluice: cordoned in Kubernetes"} jwt`,
		`POST /slurm/v0.0.42/node/gpu06 {"state":["RESUME"]} jwt`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want,+got):\n%s", diff)
	}
	status, answer = http.StatusInternalServerError, `{"errors":[{"description":"Failure to update node gpu99","error_number":2018,"error":"Invalid node name specified","source":"_update_node"}],"warnings":[]}`
	if err := c.DrainNode(ctx, "gpu99", "sluice: x"); err == nil || !strings.Contains(err.Error(), "Invalid node name specified") || !strings.Contains(err.Error(), "POST /slurm/v0.0.42/node/gpu99") {
		t.Errorf("drain of an unknown node: %v, want slurmrestd's error and the request", err)
	}
	status = http.StatusOK
	if err := c.ResumeNode(ctx, "gpu01"); err == nil || Kind(err) != ErrKindServer {
		t.Errorf("a 200 with errors: %v, want a server error", err)
	}
}

// TestWritesNeedAWritingAPI: Slurm 22.05's v0.0.38 can neither update
// nodes nor pin a job to a node; the errors say so and what to use
// instead, without a request.
func TestWritesNeedAWritingAPI(t *testing.T) {
	requests := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests++ }))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.38", TokenFile: writeToken(t, t.TempDir(), "jwt")})
	if err != nil {
		t.Fatal(err)
	}
	err = c.DrainNode(context.Background(), "gpu01", "sluice: x")
	if err == nil || !strings.Contains(err.Error(), "v0.0.38 cannot update nodes") || !strings.Contains(err.Error(), "slurm.commands") || requests != 0 {
		t.Errorf("drain over v0.0.38: %v (%d requests), want a refusal naming slurm.commands and no request", err, requests)
	}
	_, err = c.SubmitPlaceholder(context.Background(), Placeholder{Name: "x", Node: "gpu01", GRES: "gpu", GPUs: 1})
	if err == nil || !strings.Contains(err.Error(), "v0.0.38 cannot pin a job to a node") || !strings.Contains(err.Error(), "slurm.commands") || requests != 0 {
		t.Errorf("placeholder over v0.0.38: %v (%d requests), want a refusal naming slurm.commands and no request", err, requests)
	}
}

// TestCommandsDrain runs a stand-in scontrol and checks its arguments: each
// one whole (a reason with spaces is one argument, never a shell word).
func TestCommandsDrain(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "args")
	bin := filepath.Join(dir, "scontrol")
	script := "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\" >> " + log + "; done\n[ \"$3\" = state=RESUME ] && { echo 'slurm_update error: Invalid node state specified' >&2; exit 1; }\nexit 0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := Commands{Dir: dir}
	if err := s.DrainNode(context.Background(), "gpu03", "sluice: cordoned; rm -rf /"); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(log)
	if want := "[update]\n[nodename=gpu03]\n[state=DRAIN]\n[reason=sluice: cordoned; rm -rf /]\n"; string(args) != want {
		t.Errorf("scontrol got\n%s\nwant\n%s", args, want)
	}
	if err := s.ResumeNode(context.Background(), "gpu03"); err == nil || !strings.Contains(err.Error(), "Invalid node state specified") {
		t.Errorf("a failing scontrol: %v, want its message", err)
	}
}

// TestWrongTokenOn2411: slurmrestd 24.11 answers a wrong token with HTTP
// 511 (../shared/data/slurm/live-24.11/auth-bad-token-nodes-v0.0.42.json,
// meta left out); the error is an auth error that says to check the token.
func TestWrongTokenOn2411(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNetworkAuthenticationRequired)
		_, _ = w.Write([]byte(`{"errors":[{"description":"Failure to query nodes","error_number":1007,"error":"Protocol authentication error","source":"_dump_nodes"}],"warnings":[]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{Endpoint: srv.URL, InsecureSkipVerify: true, APIVersion: "v0.0.42", TokenFile: writeToken(t, t.TempDir(), "wrong")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Nodes(context.Background(), 0)
	if err == nil || Kind(err) != ErrKindAuth || !strings.Contains(err.Error(), "check the token file") {
		t.Errorf("a 511: %v (kind %s), want an auth error saying to check the token file", err, Kind(err))
	}
}
