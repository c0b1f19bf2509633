// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package providerserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// instance is what a Running workload does: it logs, and with
// Options.Serve it answers HTTP on its containers' ports at an address of
// its own. Guarded by Server.mu.
type instance struct {
	ip      string
	servers []*http.Server
	lines   []logLine
	// changed is closed, and replaced, when a line is added or the
	// instance stops.
	changed chan struct{}
	stopped bool
}

type logLine struct {
	at        time.Time
	container string
	text      string
}

// start runs e's instance: a log line per container and, when serving, a
// listener on every TCP container port of an address of the pool that no
// other instance holds. Called with s.mu.
func (s *Server) start(id string, e *entry) {
	in := &instance{changed: make(chan struct{})}
	e.instance = in
	for _, c := range e.req.Containers {
		in.add(logLine{at: s.clock.Now(), container: c.Name, text: fmt.Sprintf("container %s started from %s", c.Name, c.Image)})
	}
	if !s.serve {
		return
	}
	taken := map[string]bool{}
	for _, other := range s.workloads {
		if other.instance != nil && !other.instance.stopped {
			taken[other.instance.ip] = true
		}
	}
	for _, ip := range s.pool {
		if taken[ip] {
			continue
		}
		listeners, err := listenAll(ip, e)
		if err != nil {
			in.add(logLine{at: s.clock.Now(), container: e.req.Containers[0].Name, text: "cannot listen: " + err.Error()})
			return
		}
		in.ip = ip
		for _, l := range listeners {
			srv := &http.Server{Handler: s.answer(id, l.container, l.port), ReadHeaderTimeout: 10 * time.Second}
			in.servers = append(in.servers, srv)
			go func() { _ = srv.Serve(l) }()
		}
		return
	}
	in.add(logLine{at: s.clock.Now(), container: e.req.Containers[0].Name, text: "no address of the pool is free"})
}

// HostAddresses are this machine's global unicast IPv4 addresses: not
// loopback or link-local, which EndpointSlices refuse.
func HostAddresses() ([]string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if ok && ipnet.IP.To4() != nil && ipnet.IP.IsGlobalUnicast() {
			out = append(out, ipnet.IP.String())
		}
	}
	return out, nil
}

type portListener struct {
	net.Listener
	container string
	port      int32
}

func listenAll(ip string, e *entry) ([]portListener, error) {
	var out []portListener
	for _, c := range e.req.Containers {
		for _, p := range c.Ports {
			if p.Protocol != "" && p.Protocol != "TCP" {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(p.ContainerPort))))
			if err != nil {
				for _, o := range out {
					_ = o.Close()
				}
				return nil, err
			}
			out = append(out, portListener{Listener: l, container: c.Name, port: p.ContainerPort})
		}
	}
	return out, nil
}

// answer is a served workload's HTTP answer: who it is; each request is a
// line of the container's log.
func (s *Server) answer(id, container string, port int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		e, ok := s.workloads[id]
		if ok && e.instance != nil {
			e.instance.add(logLine{at: s.clock.Now(), container: container, text: fmt.Sprintf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)})
		}
		s.mu.Unlock()
		if !ok {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintf(w, "%s serves %s on port %d\n", id, e.req.Pod, port)
	})
}

// add appends a line. Called with Server.mu.
func (in *instance) add(l logLine) {
	in.lines = append(in.lines, l)
	if in.stopped {
		// Its followers are gone already (stop closed changed).
		return
	}
	close(in.changed)
	in.changed = make(chan struct{})
}

// stop closes the listeners and ends followers. Called with Server.mu.
func (in *instance) stop() {
	if in == nil || in.stopped {
		return
	}
	in.stopped = true
	for _, srv := range in.servers {
		_ = srv.Close()
	}
	close(in.changed)
}

// Address is the loopback address a served workload answers at.
func (s *Server) Address(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if !ok || e.instance == nil || e.instance.ip == "" || e.instance.stopped {
		return "", false
	}
	return e.instance.ip, true
}

// Log adds a line to a workload's container log.
func (s *Server) Log(id, container, text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.workloads[id]
	if !ok || e.instance == nil {
		return false
	}
	e.instance.add(logLine{at: s.clock.Now(), container: container, text: text})
	return true
}

// logs serves GET /v1/workloads/{id}/logs: the container's lines, the
// last tailLines of them, and with follow the new ones until the workload
// stops or the client goes.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	container := q.Get("container")
	tail, _ := strconv.Atoi(q.Get("tailLines"))
	follow, timestamps := q.Get("follow") == "true", q.Get("timestamps") == "true"
	var since time.Time
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "sinceTime: "+err.Error())
			return
		}
		since = t
	}
	s.mu.Lock()
	e, ok := s.workloads[id]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "no workload "+id)
		return
	}
	known := false
	for _, c := range e.req.Containers {
		known = known || c.Name == container
	}
	if !known {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, fmt.Sprintf("workload %s has no container %q", id, container))
		return
	}
	s.workload(id, e) // starts it when its delay has passed
	s.mu.Unlock()

	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	sent := -1 // index of the last line sent
	for first := true; ; first = false {
		s.mu.Lock()
		in := e.instance
		var batch []logLine
		var changed chan struct{}
		stopped := in == nil
		if in != nil {
			var mine []int
			for i, l := range in.lines {
				if i > sent && l.container == container && !l.at.Before(since) {
					mine = append(mine, i)
				}
			}
			if first && tail > 0 && len(mine) > tail {
				mine = mine[len(mine)-tail:]
			}
			for _, i := range mine {
				batch = append(batch, in.lines[i])
			}
			sent = len(in.lines) - 1
			changed, stopped = in.changed, in.stopped
		}
		s.mu.Unlock()
		for _, l := range batch {
			if timestamps {
				_, _ = out.WriteString(l.at.UTC().Format(time.RFC3339Nano) + " ")
			}
			_, _ = out.WriteString(l.text + "\n")
		}
		_ = out.Flush()
		if flusher != nil {
			flusher.Flush()
		}
		if !follow || stopped {
			return
		}
		if !wait(r.Context(), changed) {
			return
		}
	}
}

func wait(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// addresses is what a workload reports of its instance.
func (in *instance) addresses() []string {
	if in == nil || in.ip == "" {
		return nil
	}
	return []string{in.ip}
}

// Close stops every workload's instance (their listeners and log
// followers), then the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, e := range s.workloads {
		e.instance.stop()
	}
	s.mu.Unlock()
	s.Server.Close()
}
