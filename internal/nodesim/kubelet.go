// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package nodesim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// serveKubelet serves GET /containerLogs/{namespace}/{pod}/{container}
// for the simulated nodes on a loopback port until ctx ends. The
// simulator is a test double: it asks no client certificate.
func (s *Simulator) serveKubelet(ctx context.Context) (int32, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("nodesim", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return 0, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return 0, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLog)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "nodesim kubelet endpoint stopped")
		}
	}()
	return int32(ln.Addr().(*net.TCPAddr).Port), nil
}

// containerLog is a running container's log: one line saying it started.
func (s *Simulator) containerLog(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	obj, ok, _ := s.pods.GetByKey(ns + "/" + name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", ns, name), http.StatusNotFound)
		return
	}
	pod := obj.(*v1.Pod)
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = fmt.Fprintf(w, "nodesim: container %s of pod %s/%s started from %s on node %s\n", c.Name, ns, name, c.Image, pod.Spec.NodeName)
			return
		}
	}
	http.Error(w, fmt.Sprintf("container %s is not valid for pod %s/%s", container, ns, name), http.StatusBadRequest)
}
