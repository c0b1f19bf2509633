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
	"fmt"
	"net/http"
	"net/http/httptest"
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
}

type entry struct {
	req     httpprovider.CreateRequest
	created time.Time
	phase   provider.Phase
	message string
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
}

// Start starts a server on a loopback port.
func Start(o Options) *Server {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	s := &Server{token: o.Token, healthy: true, capacity: o.Capacity, startDelay: o.StartDelay, clock: o.Clock, workloads: map[string]*entry{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/capacity", s.capacityHandler)
	mux.HandleFunc("GET /v1/workloads", s.list)
	mux.HandleFunc("PUT /v1/workloads/{id}", s.create)
	mux.HandleFunc("GET /v1/workloads/{id}", s.get)
	mux.HandleFunc("DELETE /v1/workloads/{id}", s.delete)
	s.Server = httptest.NewServer(s.auth(mux))
	return s
}

// SetHealthy makes the provider report itself healthy or not.
func (s *Server) SetHealthy(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthy = ok
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
	}
	return ok
}

// Vanish removes a workload behind the node's back.
func (s *Server) Vanish(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.workloads[id]
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
	if e, ok := s.workloads[id]; ok {
		if e.req.Pod != req.Pod {
			writeError(w, http.StatusConflict, fmt.Sprintf("id %s belongs to pod %s", id, e.req.Pod))
			return
		}
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
	for i, c := range req.Containers {
		if c.Name == "" || c.Image == "" {
			return fmt.Errorf("containers[%d]: name and image are required", i)
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

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	e, ok := s.workloads[id]
	if !ok {
		writeError(w, http.StatusNotFound, "no workload "+id)
		return
	}
	writeJSON(w, http.StatusOK, s.workload(id, e))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	node := r.URL.Query().Get("node")
	if node == "" {
		writeError(w, http.StatusBadRequest, "query parameter node is required")
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

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	if _, ok := s.workloads[id]; !ok {
		writeError(w, http.StatusNotFound, "no workload "+id)
		return
	}
	delete(s.workloads, id)
	w.WriteHeader(http.StatusNoContent)
}

// workload is e as the contract reports it; a workload is Running and
// Ready once its start delay has passed.
func (s *Server) workload(id string, e *entry) provider.Workload {
	if e.phase == provider.Pending && s.clock.Since(e.created) >= s.startDelay {
		e.phase = provider.Running
	}
	w := provider.Workload{ID: id, Node: e.req.Node, Pod: e.req.Pod, Phase: e.phase, Message: e.message}
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
