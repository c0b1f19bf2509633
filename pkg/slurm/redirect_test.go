// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestTokenNeverFollowsARedirect: a slurmrestd (or anything in front of
// it) that answers with a redirect to another host never receives the
// token there: the client does not follow redirects, and says so.
func TestTokenNeverFollowsARedirect(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("X-SLURM-USER-TOKEN"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	restd := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer restd.Close()
	c, err := NewClient(ClientConfig{Endpoint: restd.URL, InsecureSkipVerify: true, APIVersion: "v0.0.40", TokenFile: writeToken(t, t.TempDir(), "SLURM_JWT=s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Nodes(context.Background(), 0)
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("the token followed a redirect to another host: %d requests there", len(leaked))
	}
	if err == nil || !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("err %v, want one saying slurmrestd redirected, without the token", err)
	}
}

// TestTokenNeverOverPlainHTTP: a JWT endpoint over plain http is refused
// when the client is built (and at start-up, by validation), so the token
// never crosses the network unencrypted; https and unix sockets remain.
func TestTokenNeverOverPlainHTTP(t *testing.T) {
	token := writeToken(t, t.TempDir(), "s3cret")
	_, err := NewClient(ClientConfig{Endpoint: "http://slurm.example:6820", TokenFile: token})
	if err == nil || !strings.Contains(err.Error(), "https://") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("http endpoint with a token: err %v, want a refusal naming https://", err)
	}
	if _, err := NewClient(ClientConfig{Endpoint: "https://slurm.example:6820", TokenFile: token}); err != nil {
		t.Errorf("https endpoint: %v", err)
	}
	if _, err := NewClient(ClientConfig{Endpoint: "unix:///run/slurmrestd.sock"}); err != nil {
		t.Errorf("unix socket: %v", err)
	}
}
