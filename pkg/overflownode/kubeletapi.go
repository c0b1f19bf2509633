// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// serveKubeletAPI serves the kubelet API on cfg.KubeletAPI until ctx ends:
// container logs from the providers; the providers' usage measures as
// resource metrics and a stats summary (usage.go); exec, attach and
// port-forward refused with the reason.
func (n *Node) serveKubeletAPI(ctx context.Context) error {
	k := n.cfg.KubeletAPI
	tlsConfig, err := kubeletTLS(k, n.cfg.NodeName)
	if err != nil {
		return fmt.Errorf("kubeletAPI: %w", err)
	}
	addr := net.JoinHostPort(k.Address, strconv.Itoa(int(k.Port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kubeletAPI: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.containerLogs)
	for _, what := range []string{"exec", "attach"} {
		mux.HandleFunc("/"+what+"/{namespace}/{pod}/{container}", n.refuse(what))
	}
	mux.HandleFunc("/portForward/{namespace}/{pod}", n.refuse("port-forward"))
	mux.Handle("GET /metrics/resource", n.resourceMetrics())
	mux.HandleFunc("GET /stats/summary", n.statsSummary)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	// Requests end with ctx (a follow stream included).
	srv := &http.Server{Handler: n.authorized(mux), TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Kubelet API server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			_ = srv.Close()
		}
		<-done
	}()
	n.kubeletDone = done
	return nil
}

// kubeletTLS is the server's TLS: its certificate (or a self-signed one),
// and client certificates required and verified against the client CA.
func kubeletTLS(k *KubeletAPI, nodeName string) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	if k.CertFile != "" {
		cert, err = tls.LoadX509KeyPair(k.CertFile, k.KeyFile)
	} else {
		var certPEM, keyPEM []byte
		certPEM, keyPEM, err = certutil.GenerateSelfSignedCertKey(nodeName, []net.IP{net.ParseIP(k.Address)}, nil)
		if err == nil {
			cert, err = tls.X509KeyPair(certPEM, keyPEM)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	pool, err := certutil.NewPool(k.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("clientCAFile: %w", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// authorized lets a request through when the client certificate's user
// (CN) and groups (O) may use the request's subresource of this node
// (subresourceOf), as the kubelet's webhook authorization asks the
// apiserver.
func (n *Node) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			writeStatus(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		subject := r.TLS.PeerCertificates[0].Subject
		attrs := &authorizationv1.ResourceAttributes{Verb: verbOf(r.Method), Resource: "nodes", Subresource: subresourceOf(r.URL.Path), Name: n.cfg.NodeName}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: subject.CommonName, Groups: subject.Organization, ResourceAttributes: attrs,
		}}
		ctx, cancel := context.WithTimeout(r.Context(), n.cfg.RequestTimeout())
		defer cancel()
		res, err := n.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Kubelet API: authorization check failed", "user", subject.CommonName)
			writeStatus(w, http.StatusInternalServerError, "authorization check failed")
			return
		}
		if !res.Status.Allowed {
			writeStatus(w, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", subject.CommonName, attrs.Verb, attrs.Subresource))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// subresourceOf is the node subresource a kubelet API path is authorized
// as, as the kubelet maps it: metrics-server is allowed nodes/metrics and
// nodes/stats, not nodes/proxy.
func subresourceOf(path string) string {
	switch {
	case path == "/metrics" || strings.HasPrefix(path, "/metrics/"):
		return "metrics"
	case path == "/stats" || strings.HasPrefix(path, "/stats/"):
		return "stats"
	}
	return "proxy"
}

// verbOf is the authorization verb of an HTTP method, as the kubelet maps
// it.
func verbOf(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// containerLogs streams a container's log from the provider that runs the
// pod (GET /containerLogs/{namespace}/{pod}/{container}, with the query of
// a pod log request).
func (n *Node) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := logOptions(r.URL.Query(), n.now())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	if r.URL.Query().Get("tailLines") == "0" && !opts.Follow {
		// No line asked for (Tail 0 means all to a provider).
		w.Header().Set("Content-Type", "text/plain")
		return
	}
	pod, rem, code, err := n.runningAt(namespace, name)
	if err != nil {
		writeStatus(w, code, err.Error())
		return
	}
	if !hasContainer(pod, container) {
		writeStatus(w, http.StatusBadRequest, fmt.Sprintf("container %s is not valid for pod %s/%s", container, namespace, name))
		return
	}
	// The provider must start answering within the request timeout; the
	// stream then runs as long as the client reads it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	timer := time.AfterFunc(n.cfg.RequestTimeout(), cancel)
	logs, err := rem.member.Provider.Logs(ctx, rem.w.ID, container, opts)
	if !timer.Stop() {
		if err == nil {
			_ = logs.Close()
		}
		writeStatus(w, http.StatusGatewayTimeout, fmt.Sprintf("provider %s did not answer within %s", rem.member.Config.Name, n.cfg.RequestTimeout()))
		return
	}
	switch {
	case errors.Is(err, provider.ErrUnsupported):
		writeStatus(w, http.StatusBadRequest, fmt.Sprintf("pod %s/%s runs at provider %s, which serves no logs", namespace, name, rem.member.Config.Name))
		return
	case errors.Is(err, provider.ErrNotFound):
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s: its remote workload %s is gone from provider %s", namespace, name, rem.w.ID, rem.member.Config.Name))
		return
	case err != nil:
		writeStatus(w, http.StatusBadGateway, fmt.Sprintf("provider %s: %v", rem.member.Config.Name, err))
		return
	}
	defer logs.Close()
	w.Header().Set("Content-Type", "text/plain")
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		k, err := logs.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// logOptions reads a pod log request's query.
func logOptions(q url.Values, now time.Time) (provider.LogOptions, error) {
	var o provider.LogOptions
	var err error
	num := func(name string, min int) int {
		v := q.Get(name)
		if v == "" || err != nil {
			return 0
		}
		k, perr := strconv.Atoi(v)
		if perr != nil || k < min {
			err = fmt.Errorf("query %s=%q: want an integer of at least %d", name, v, min)
		}
		return k
	}
	flag := func(name string) bool {
		v := q.Get(name)
		if v == "" || err != nil {
			return false
		}
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			err = fmt.Errorf("query %s=%q: want true or false", name, v)
		}
		return b
	}
	o.Tail, o.LimitBytes = num("tailLines", 0), num("limitBytes", 1)
	o.Follow, o.Timestamps, o.Previous = flag("follow"), flag("timestamps"), flag("previous")
	if s := num("sinceSeconds", 1); s > 0 {
		o.Since = now.Add(-time.Duration(s) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" && err == nil {
		t, perr := time.Parse(time.RFC3339, v)
		if perr != nil {
			err = fmt.Errorf("query sinceTime=%q: want an RFC 3339 time", v)
		}
		o.Since = t
	}
	return o, err
}

// runningAt is a pod bound to this node and the remote workload that runs
// it, or the HTTP status and error saying why there is none.
func (n *Node) runningAt(namespace, name string) (*v1.Pod, *remote, int, error) {
	pod, err := n.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil, http.StatusNotFound, fmt.Errorf("pod %s/%s is not on node %s", namespace, name, n.cfg.NodeName)
	}
	if err != nil {
		return nil, nil, http.StatusInternalServerError, err
	}
	n.mu.Lock()
	r, ok := n.workloads[pod.UID]
	var copied remote
	if ok {
		copied = *r
	}
	n.mu.Unlock()
	if !ok {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("pod %s/%s has not started at a provider yet", namespace, name)
	}
	return pod, &copied, 0, nil
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, set := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range set {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// refuse answers a streaming request (exec, attach, port-forward) that no
// provider offers, before any upgrade, with the reason: kubectl prints it.
func (n *Node) refuse(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		namespace, name := r.PathValue("namespace"), r.PathValue("pod")
		where := "no provider"
		if _, rem, _, err := n.runningAt(namespace, name); err == nil {
			where = "provider " + rem.member.Config.Name
		}
		writeStatus(w, http.StatusBadRequest, fmt.Sprintf("%s is not supported on overflow node %s: pod %s/%s runs at %s; sluice's providers serve logs only", what, n.cfg.NodeName, namespace, name, where))
	}
}

// writeStatus answers with msg as plain text, as the kubelet does: the
// apiserver passes it on as its error's message (kubectl prints it).
func writeStatus(w http.ResponseWriter, code int, msg string) {
	http.Error(w, msg, code)
}
