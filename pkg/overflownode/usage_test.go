// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// measuring is a fake provider that measures its workloads.
type measuring struct {
	*fakeProvider
	mu    sync.Mutex
	at    time.Time
	cpu   string
	mem   string
	err   error
	calls int
}

func (m *measuring) Usage(context.Context) ([]provider.Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.err != nil {
		return nil, m.err
	}
	var out []provider.Usage
	for _, w := range m.workloads {
		out = append(out, provider.Usage{ID: w.ID, Time: m.at, Containers: []provider.ContainerUsage{
			{Name: "c", CPU: resource.MustParse(m.cpu), Memory: resource.MustParse(m.mem)}}})
	}
	return out, nil
}

func (m *measuring) measure(at time.Time, cpu, mem string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.at, m.cpu, m.mem, m.err = at, cpu, mem, err
}

// scrape reads /metrics/resource as metrics-server does: sample values
// and timestamps by series.
func scrape(t *testing.T, n *Node) map[string]*model.Sample {
	t.Helper()
	rec := httptest.NewRecorder()
	n.resourceMetrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/resource", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics/resource: %d %s", rec.Code, rec.Body)
	}
	dec := expfmt.SampleDecoder{Dec: expfmt.NewDecoder(strings.NewReader(rec.Body.String()), expfmt.NewFormat(expfmt.TypeTextPlain)),
		Opts: &expfmt.DecodeOptions{Timestamp: model.Now()}}
	var all model.Vector
	if err := dec.Decode(&all); err != nil {
		t.Fatalf("/metrics/resource: %v\n%s", err, rec.Body)
	}
	for {
		var v model.Vector
		if err := dec.Decode(&v); err != nil {
			break
		}
		all = append(all, v...)
	}
	out := map[string]*model.Sample{}
	for _, s := range all {
		name := string(s.Metric[model.MetricNameLabel])
		if pod := s.Metric["pod"]; pod != "" {
			name += "/" + string(pod)
		}
		if c := s.Metric["container"]; c != "" {
			name += "/" + string(c)
		}
		out[name] = s
	}
	return out
}

// TestResourceMetricsFromProviderUsage: the node serves its providers'
// measures under the kubelet's names: CPU integrated from the rates into
// a cumulative counter (from the workload's start, then between
// measures), the working set, the start time, each at the measure's own
// time; a pod at a provider that measures nothing has none (not zero); a
// failing usage call leaves the last measure in use until it is stale.
func TestResourceMetricsFromProviderUsage(t *testing.T) {
	m := &measuring{fakeProvider: newFake("1")}
	plain := newFake("8")
	f := newFixture(t, member("metered", 0, 0, m), member("plain", 1, 0, plain))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	for _, name := range []string{"llm-0", "llm-1"} {
		if err := f.node.CreatePod(ctx, f.addPod(t, name, 1)); err != nil {
			t.Fatal(err)
		}
	}
	started := f.clock.Add(-100 * time.Second)
	m.set(func(p *fakeProvider) {
		for id, w := range p.workloads {
			w.StartedAt = &started
			p.workloads[id] = w
		}
	})
	f.node.Reconcile(ctx)
	if len(m.workloads) != 1 || len(plain.workloads) != 1 {
		t.Fatalf("workloads: metered %d, plain %d, want 1 each", len(m.workloads), len(plain.workloads))
	}

	m.measure(f.clock, "500m", "256Mi", nil)
	got := scrape(t, f.node)
	want := func(series string, value float64, at time.Time) {
		t.Helper()
		s := got[series]
		switch {
		case s == nil:
			t.Errorf("%s missing from /metrics/resource", series)
		case float64(s.Value) != value || !s.Timestamp.Time().Equal(at):
			t.Errorf("%s = %v at %v, want %v at %v", series, s.Value, s.Timestamp.Time().UTC(), value, at)
		}
	}
	// A counter of this process's own, started a second before its
	// first measure (metrics-server takes it as a new container, whatever
	// an earlier leader counted): 0.5 cores over that second.
	first := f.clock
	want("container_cpu_usage_seconds_total/llm-0/c", 0.5, f.clock)
	want("container_memory_working_set_bytes/llm-0/c", 256<<20, f.clock)
	want("container_start_time_seconds/llm-0/c", float64(first.Add(-counterLead).Unix()), f.clock)
	if got["node_cpu_usage_seconds_total"] != nil {
		t.Errorf("node CPU served before any increment: %v", got["node_cpu_usage_seconds_total"])
	}
	for series := range got {
		if strings.Contains(series, "llm-1") {
			t.Errorf("%s served for a pod whose provider measures nothing, want none", series)
		}
	}

	// Within usageFresh the sample is served again, not asked for.
	calls := m.calls
	f.clock = f.clock.Add(time.Second)
	scrape(t, f.node)
	if m.calls != calls {
		t.Errorf("a second scrape within %s asked the provider again", usageFresh)
	}

	// 1 core for the next 10 s: 10 more core-seconds, the node's too,
	// stamped with the measure's time.
	f.clock = f.clock.Add(9 * time.Second)
	m.measure(f.clock, "1", "300Mi", nil)
	got = scrape(t, f.node)
	want("container_cpu_usage_seconds_total/llm-0/c", 10.5, f.clock)
	want("node_cpu_usage_seconds_total", 10, f.clock)
	want("node_memory_working_set_bytes", 300<<20, f.clock)
	want("pod_cpu_usage_seconds_total/llm-0", 10.5, f.clock)

	// A failing call: the last measure, until it is stale.
	measured := f.clock
	m.measure(f.clock, "1", "300Mi", errors.New("metrics backend down"))
	f.clock = f.clock.Add(usageStale - time.Second)
	got = scrape(t, f.node)
	want("container_cpu_usage_seconds_total/llm-0/c", 10.5, measured)
	f.clock = f.clock.Add(usageFresh)
	got = scrape(t, f.node)
	if s := got["container_cpu_usage_seconds_total/llm-0/c"]; s != nil {
		t.Errorf("a measure older than %s still served: %v", usageStale, s)
	}
	// Measured again: the same counter goes on (the gap at the new rate),
	// never restarting below what was served.
	f.clock = f.clock.Add(usageFresh)
	gap := f.clock.Sub(measured).Seconds()
	m.measure(f.clock, "2", "300Mi", nil)
	got = scrape(t, f.node)
	want("container_cpu_usage_seconds_total/llm-0/c", 10.5+2*gap, f.clock)
	want("container_start_time_seconds/llm-0/c", float64(first.Add(-counterLead).Unix()), f.clock)

	// /stats/summary: the measured pod with CPU and memory, the other
	// listed without.
	f.clock = f.clock.Add(usageFresh)
	m.measure(f.clock, "250m", "1Gi", nil)
	rec := httptest.NewRecorder()
	f.node.statsSummary(rec, httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	var sum statsapi.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &sum); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("/stats/summary: %d %v\n%s", rec.Code, err, rec.Body)
	}
	byName := map[string]statsapi.PodStats{}
	for _, p := range sum.Pods {
		byName[p.PodRef.Name] = p
	}
	if p := byName["llm-0"]; p.CPU == nil || *p.CPU.UsageNanoCores != 250e6 || p.Memory == nil || *p.Memory.WorkingSetBytes != 1<<30 {
		t.Errorf("summary of llm-0: %s, want 250m cores and 1Gi", describeStats(p))
	}
	if p, ok := byName["llm-1"]; !ok || p.CPU != nil || p.Memory != nil || len(p.Containers) != 1 || p.Containers[0].CPU != nil {
		t.Errorf("summary of llm-1: %s (listed %v), want listed without CPU or memory", describeStats(p), ok)
	}
	if sum.Node.NodeName != f.node.cfg.NodeName || sum.Node.Memory == nil || *sum.Node.Memory.WorkingSetBytes != 1<<30 {
		t.Errorf("summary of the node: %+v", sum.Node)
	}

	// A new leader (a process with no counters): its series starts after
	// everything served before, so metrics-server takes it as a new
	// container and computes no rate across the two (the old counter
	// would read as a spike).
	served := got["container_cpu_usage_seconds_total/llm-0/c"].Timestamp.Time()
	f.node.usageMeter = meter{}
	f.clock = f.clock.Add(usageFresh)
	m.measure(f.clock, "2", "300Mi", nil)
	got = scrape(t, f.node)
	if s := got["container_start_time_seconds/llm-0/c"]; s == nil || !time.Unix(int64(s.Value), 0).After(served) {
		t.Errorf("a new leader's series starts at %v, want after the last sample served (%v)", s, served)
	}

	// An idle container still has a counter above 0 (metrics-server drops
	// a pod with a 0); a working set of 0 is no measure: the pod is absent.
	f.clock = f.clock.Add(usageFresh)
	m.measure(f.clock, "0", "1Gi", nil)
	if got = scrape(t, f.node); got["container_cpu_usage_seconds_total/llm-0/c"] == nil || got["container_cpu_usage_seconds_total/llm-0/c"].Value <= 0 {
		t.Errorf("an idle container's counter: %v, want above 0", got["container_cpu_usage_seconds_total/llm-0/c"])
	}
	f.clock = f.clock.Add(usageFresh)
	m.measure(f.clock, "1", "0", nil)
	if got = scrape(t, f.node); got["container_memory_working_set_bytes/llm-0/c"] != nil {
		t.Errorf("a container without a working set served: %v", got["container_memory_working_set_bytes/llm-0/c"])
	}

	// A provider that says it measures nothing: its pods have none.
	f.clock = f.clock.Add(usageFresh)
	m.measure(f.clock, "1", "1Gi", fmt.Errorf("%w: no metrics", provider.ErrUnsupported))
	if got = scrape(t, f.node); got["container_cpu_usage_seconds_total/llm-0/c"] != nil || got["node_cpu_usage_seconds_total"] != nil {
		t.Errorf("usage served for a provider that measures nothing: %v", got)
	}
}

func describeStats(p statsapi.PodStats) string {
	data, _ := json.Marshal(p)
	return string(data)
}

// TestKubeletAPIAuthorizesAsTheKubelet: paths map to the node
// subresources a kubelet checks, so metrics-server needs nodes/metrics
// and nodes/stats, not nodes/proxy.
func TestKubeletAPIAuthorizesAsTheKubelet(t *testing.T) {
	for path, want := range map[string]string{
		"/metrics/resource": "metrics", "/metrics": "metrics", "/stats/summary": "stats",
		"/containerLogs/ns/p/c": "proxy", "/exec/ns/p/c": "proxy", "/metricsx": "proxy",
	} {
		if got := subresourceOf(path); got != want {
			t.Errorf("subresourceOf(%q) = %q, want %q", path, got, want)
		}
	}
}
