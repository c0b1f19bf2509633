// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// servingOptions say where and how /metrics is served.
type servingOptions struct {
	addr              string
	certFile, keyFile string
}

// serve exposes, over TLS, /metrics to clients the home cluster
// authenticates (TokenReview: a ServiceAccount token, as Prometheus
// sends) and authorizes (SubjectAccessReview: get on the non-resource URL
// /metrics), as kube-scheduler does; /healthz (the process runs) and
// /readyz (a standby that has read the leader Lease, or the leader once
// its node runs) answer anyone, for kubelet's probes.
// The serving certificate is read from certFile/keyFile and re-read when
// they change, or generated (self-signed) at start when none is given.
func serve(ctx context.Context, o servingOptions, client kubernetes.Interface, ready func() bool) error {
	tlsConfig, err := servingTLS(ctx, o)
	if err != nil {
		return err
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      options.DefaultAuthWebhookRetryBackoff(),
		CacheTTL:                 10 * time.Second,
	}.New()
	if err != nil {
		return fmt.Errorf("/metrics authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return fmt.Errorf("/metrics authorization: %w", err)
	}
	metrics := legacyregistry.Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := authn.AuthenticateRequest(r)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "/metrics: authentication failed (TokenReview)")
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		decision, why, err := authz.Authorize(r.Context(), authorizer.AttributesRecord{User: res.User, Verb: "get", Path: r.URL.Path})
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "/metrics: authorization check failed", "user", res.User.GetName())
		}
		if decision != authorizer.DecisionAllow {
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not get /metrics (%s)", res.User.GetName(), why), http.StatusForbidden)
			return
		}
		metrics.ServeHTTP(w, r)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "neither standing by nor running the node yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--metrics-bind-address %s: %w", o.addr, err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "metrics server stopped")
		}
	}()
	return nil
}

// servingTLS is the serving certificate: from files, re-read when they
// change, or self-signed for this host.
func servingTLS(ctx context.Context, o servingOptions) (*tls.Config, error) {
	if (o.certFile == "") != (o.keyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if o.certFile == "" {
		host, _, err := net.SplitHostPort(o.addr)
		if err != nil || host == "" {
			host = "localhost"
		}
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("self-signed serving certificate: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
	}
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", o.certFile, o.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file %s: %w", o.certFile, err)
	}
	go content.Run(ctx, 1)
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		certPEM, keyPEM := content.CurrentCertKeyContent()
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		return &cert, nil
	}}, nil
}
