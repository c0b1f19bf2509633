// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package providerserver is a small, conforming implementation of the HTTP
// overflow provider contract (docs/overflow-http-provider.yaml), written
// for tests: workloads live in memory, start Pending and become Running
// and Ready after a delay, and the test can make the provider unhealthy,
// shrink its capacity, fail a workload or make one vanish.
package providerserver

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/httpprovider"
)

// Server is a running provider.
type Server struct {
	*httptest.Server

	mu         sync.Mutex
	token      string
	healthy    bool
	capacity   map[string]string
	startDelay time.Duration
	clock      clock.PassiveClock
	workloads  map[string]*entry
	creates    int
	adoptions  int
	serve      bool
	pool       []string
	// vanishAfterRead are ids removed once a GET of them is answered.
	vanishAfterRead map[string]bool
	// usage is what every container of a Running workload uses (nil:
	// the provider measures nothing, and answers 501).
	usage *httpprovider.ContainerUsage
}

type entry struct {
	req     httpprovider.CreateRequest
	created time.Time
	phase   provider.Phase
	message string
	// instance runs while the workload is Running.
	instance *instance
}

// Options configure a server.
type Options struct {
	// Token, when set, is required as a bearer token.
	Token string
	// Capacity is reported by /v1/capacity.
	Capacity map[string]string
	// StartDelay is how long a workload stays Pending.
	StartDelay time.Duration
	// Clock measures StartDelay (a fake one in unit tests); nil is the
	// real clock.
	Clock clock.PassiveClock
	// TLS serves https (with a certificate of its own, WriteCA), which
	// the contract requires for Secrets.
	TLS bool
	// Serve makes every Running workload answer HTTP on its containers'
	// TCP ports at an address of its own, taken from ServeAddresses and
	// reported as its address; each request is a line of its log. (Not
	// loopback addresses: EndpointSlices refuse them.)
	Serve bool
	// ServeAddresses are the IPs handed out, one per served workload
	// (HostAddresses when empty).
	ServeAddresses []string
}

// Start starts a server on a loopback port.
func Start(o Options) *Server {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	s := &Server{token: o.Token, healthy: true, capacity: o.Capacity, startDelay: o.StartDelay, clock: o.Clock, workloads: map[string]*entry{}, serve: o.Serve, pool: o.ServeAddresses}
	if o.Serve && len(s.pool) == 0 {
		s.pool, _ = HostAddresses()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/capacity", s.capacityHandler)
	mux.HandleFunc("GET /v1/workloads", s.list)
	mux.HandleFunc("PUT /v1/workloads/{id}", s.create)
	mux.HandleFunc("GET /v1/workloads/{id}", s.get)
	mux.HandleFunc("DELETE /v1/workloads/{id}", s.delete)
	mux.HandleFunc("PUT /v1/workloads/{id}/pod", s.adopt)
	mux.HandleFunc("GET /v1/workloads/{id}/logs", s.logs)
	mux.HandleFunc("GET /v1/usage", s.usageHandler)
	if o.TLS {
		s.Server = httptest.NewTLSServer(s.auth(mux))
	} else {
		s.Server = httptest.NewServer(s.auth(mux))
	}
	return s
}

// WriteCA writes the server's certificate, for a client's caFile, to a
// file in dir and returns its path.
func (s *Server) WriteCA(dir string) (string, error) {
	path := filepath.Join(dir, "provider-ca.crt")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return path, os.WriteFile(path, data, 0o600)
}

// Env is the environment the workload's container runs with, as this
// provider resolves it from the request: literal values, keys of the
// request's Secrets and ConfigMaps, and envFrom.
func (s *Server) Env(id, container string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if !ok {
		return nil, false
	}
	for _, c := range e.req.Containers {
		if c.Name == container {
			env, err := resolveEnv(&e.req, c)
			return env, err == nil
		}
	}
	return nil, false
}

// File is the content of the file a workload's volume holds at path
// (every key of its Secret or ConfigMap as a file, or the items listed).
func (s *Server) File(id, volume, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if !ok {
		return nil, false
	}
	for _, v := range e.req.Volumes {
		if v.Name != volume {
			continue
		}
		src, objs := v.Secret, e.req.Secrets
		if v.ConfigMap != nil {
			src, objs = v.ConfigMap, e.req.ConfigMaps
		}
		if src == nil {
			return nil, false
		}
		data := object(objs, src.Name)
		if len(src.Items) == 0 {
			b, ok := data[path]
			return b, ok
		}
		for _, it := range src.Items {
			if it.Path == path {
				b, ok := data[it.Key]
				return b, ok
			}
		}
	}
	return nil, false
}

func object(objs []httpprovider.Object, name string) map[string][]byte {
	for _, o := range objs {
		if o.Name == name {
			return o.Data
		}
	}
	return nil
}

func hasObject(objs []httpprovider.Object, name string) bool {
	for _, o := range objs {
		if o.Name == name {
			return true
		}
	}
	return false
}

// resolveEnv resolves a container's environment against the request;
// a missing object or key that is not optional is an error.
func resolveEnv(req *httpprovider.CreateRequest, c httpprovider.Container) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		ref, objs := from.Secret, req.Secrets
		if from.ConfigMap != nil {
			ref, objs = from.ConfigMap, req.ConfigMaps
		}
		if ref == nil {
			return nil, fmt.Errorf("container %s: envFrom names neither a secret nor a configMap", c.Name)
		}
		if !hasObject(objs, ref.Name) && !ref.Optional {
			return nil, fmt.Errorf("container %s: envFrom: %s is not in the request", c.Name, ref.Name)
		}
		for k, v := range object(objs, ref.Name) {
			env[from.Prefix+k] = string(v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
			continue
		}
		ref, objs := e.ValueFrom.Secret, req.Secrets
		if e.ValueFrom.ConfigMap != nil {
			ref, objs = e.ValueFrom.ConfigMap, req.ConfigMaps
		}
		if ref == nil {
			return nil, fmt.Errorf("container %s: env %s: valueFrom names neither a secret nor a configMap", c.Name, e.Name)
		}
		v, ok := object(objs, ref.Name)[ref.Key]
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, fmt.Errorf("container %s: env %s: key %s of %s is not in the request", c.Name, e.Name, ref.Key, ref.Name)
		}
		env[e.Name] = string(v)
	}
	return env, nil
}

// SetHealthy makes the provider report itself healthy or not.
func (s *Server) SetHealthy(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthy = ok
}

// SetUsage makes every container of every Running workload use cpu
// cores and memory (Kubernetes quantities), measured when asked; until it
// is called the provider measures nothing (501).
func (s *Server) SetUsage(cpu, memory string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = &httpprovider.ContainerUsage{CPU: cpu, Memory: memory}
}

func (s *Server) usageHandler(w http.ResponseWriter, r *http.Request) {
	node, ok := nodeParam(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usage == nil {
		writeError(w, http.StatusNotImplemented, "this provider measures no usage")
		return
	}
	out := httpprovider.UsageList{Items: []httpprovider.WorkloadUsage{}}
	now := s.clock.Now().UTC()
	for id, e := range s.workloads {
		if e.req.Node != node || s.workload(id, e).Phase != provider.Running {
			continue
		}
		u := httpprovider.WorkloadUsage{ID: id, Timestamp: now}
		for _, c := range e.req.Containers {
			u.Containers = append(u.Containers, httpprovider.ContainerUsage{Name: c.Name, CPU: s.usage.CPU, Memory: s.usage.Memory})
		}
		out.Items = append(out.Items, u)
	}
	writeJSON(w, http.StatusOK, out)
}

// SetCapacity replaces the reported capacity.
func (s *Server) SetCapacity(c map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity = c
}

// Fail makes a workload fail with message.
func (s *Server) Fail(id, message string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if ok {
		e.phase, e.message = provider.Failed, message
		e.instance.stop()
	}
	return ok
}

// Vanish removes a workload behind the node's back.
func (s *Server) Vanish(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if ok {
		e.instance.stop()
	}
	delete(s.workloads, id)
	return ok
}

// IDs lists the workloads' ids.
func (s *Server) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.workloads))
	for id := range s.workloads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Creates counts the workloads created (not the repeated PUTs).
func (s *Server) Creates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// Request returns the create request of a workload.
func (s *Server) Request(id string) (httpprovider.CreateRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if !ok {
		return httpprovider.CreateRequest{}, false
	}
	return e.req, true
}

func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := httpprovider.Health{Healthy: s.healthy}
	if !s.healthy {
		h.Message = "maintenance: not taking workloads"
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) capacityHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("node") == "" {
		writeError(w, http.StatusBadRequest, "query parameter node is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, httpprovider.Capacity{Resources: s.capacity})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req httpprovider.CreateRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	if r.TLS == nil && (len(req.Secrets) > 0 || len(req.ConfigMaps) > 0) {
		writeError(w, http.StatusBadRequest, "secrets and configMaps are accepted over https only")
		return
	}
	if err := validate(id, &req); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.healthy {
		writeError(w, http.StatusServiceUnavailable, "not taking workloads")
		return
	}
	if _, ok := s.workloads[id]; !ok && r.Header.Get("If-Match") == "*" {
		// Only an update of what exists was asked for.
		writeError(w, http.StatusPreconditionFailed, "no workload "+id)
		return
	}
	if e, ok := s.workloads[id]; ok {
		if e.req.Pod != req.Pod {
			writeError(w, http.StatusConflict, fmt.Sprintf("id %s belongs to pod %s", id, e.req.Pod))
			return
		}
		// The current data replaces the copies.
		e.req.Secrets, e.req.ConfigMaps = req.Secrets, req.ConfigMaps
		writeJSON(w, http.StatusOK, s.workload(id, e))
		return
	}
	e := &entry{req: req, created: s.clock.Now(), phase: provider.Pending}
	s.workloads[id] = e
	s.creates++
	writeJSON(w, http.StatusCreated, s.workload(id, e))
}

func validate(id string, req *httpprovider.CreateRequest) error {
	if req.ID != id {
		return fmt.Errorf("body id %q does not match path id %q", req.ID, id)
	}
	if req.Node == "" || req.Pod.Namespace == "" || req.Pod.Name == "" || req.Pod.UID == "" {
		return fmt.Errorf("node, pod.namespace, pod.name and pod.uid are required")
	}
	if len(req.Containers) == 0 {
		return fmt.Errorf("at least one container is required")
	}
	for i, v := range req.Volumes {
		switch {
		case v.Secret != nil && !hasObject(req.Secrets, v.Secret.Name) && !v.Secret.Optional:
			return fmt.Errorf("volumes[%d] (%s): secret %s is not in the request", i, v.Name, v.Secret.Name)
		case v.ConfigMap != nil && !hasObject(req.ConfigMaps, v.ConfigMap.Name) && !v.ConfigMap.Optional:
			return fmt.Errorf("volumes[%d] (%s): configMap %s is not in the request", i, v.Name, v.ConfigMap.Name)
		}
	}
	for i, c := range req.Containers {
		if c.Name == "" || c.Image == "" {
			return fmt.Errorf("containers[%d]: name and image are required", i)
		}
		if _, err := resolveEnv(req, c); err != nil {
			return fmt.Errorf("containers[%d]: %v", i, err)
		}
		for _, l := range []map[string]string{c.Resources.Requests, c.Resources.Limits} {
			for name, v := range l {
				if _, err := resource.ParseQuantity(v); err != nil {
					return fmt.Errorf("containers[%d].resources %s=%q: %v", i, name, v, err)
				}
			}
		}
	}
	return nil
}

// lookup is the workload the request's path names; it answers 404 when
// there is none. Called with s.mu.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (string, *entry, bool) {
	id := r.PathValue("id")
	e, ok := s.workloads[id]
	if !ok {
		writeError(w, http.StatusNotFound, "no workload "+id)
	}
	return id, e, ok
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.workload(id, e))
	if s.vanishAfterRead[id] {
		delete(s.vanishAfterRead, id)
		e.instance.stop()
		delete(s.workloads, id)
	}
}

// VanishAfterRead removes a workload right after the next GET of it is
// answered, as a workload lost between a client's read and its next
// request.
func (s *Server) VanishAfterRead(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vanishAfterRead == nil {
		s.vanishAfterRead = map[string]bool{}
	}
	s.vanishAfterRead[id] = true
}

// nodeParam is the request's node query parameter, or answers 400.
func nodeParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	node := r.URL.Query().Get("node")
	if node == "" {
		writeError(w, http.StatusBadRequest, "query parameter node is required")
	}
	return node, node != ""
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	node, ok := nodeParam(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := httpprovider.WorkloadList{Items: []provider.Workload{}}
	ids := make([]string, 0, len(s.workloads))
	for id := range s.workloads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if e := s.workloads[id]; e.req.Node == node {
			out.Items = append(out.Items, s.workload(id, e))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// adopt re-points a workload at another pod.
func (s *Server) adopt(w http.ResponseWriter, r *http.Request) {
	var ref provider.PodRef
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	if ref.Namespace == "" || ref.Name == "" || ref.UID == "" {
		writeError(w, http.StatusUnprocessableEntity, "namespace, name and uid are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	e.req.Pod = ref
	s.adoptions++
	writeJSON(w, http.StatusOK, s.workload(id, e))
}

// Adoptions counts the workloads re-pointed at another pod.
func (s *Server) Adoptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adoptions
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	e.instance.stop()
	delete(s.workloads, id)
	w.WriteHeader(http.StatusNoContent)
}

// workload is e as the contract reports it; a workload is Running and
// Ready once its start delay has passed.
func (s *Server) workload(id string, e *entry) provider.Workload {
	if e.phase == provider.Pending && s.clock.Since(e.created) >= s.startDelay {
		e.phase = provider.Running
		s.start(id, e)
	}
	created := e.created.UTC()
	w := provider.Workload{ID: id, Node: e.req.Node, Pod: e.req.Pod, Phase: e.phase, Message: e.message, CreatedAt: &created}
	if e.phase == provider.Running {
		w.Addresses = e.instance.addresses()
	}
	switch e.phase {
	case provider.Running:
		w.Ready = true
		t := e.created.Add(s.startDelay).UTC()
		w.StartedAt = &t
	case provider.Pending:
		w.Message = "pulling " + strings.Join(images(e.req), ", ")
	}
	return w
}

func images(req httpprovider.CreateRequest) []string {
	var out []string
	for _, c := range req.Containers {
		out = append(out, c.Image)
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, httpprovider.Error{Error: msg})
}
