// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// What the node serves of its providers' usage measures, as a kubelet
// serves its cgroups': /metrics/resource (what metrics-server scrapes)
// and /stats/summary. A provider's measure is a CPU rate; the node
// integrates it into the cumulative CPU seconds a kubelet reports.
const (
	// usageFresh: a sample younger than this is served again rather
	// than asked for (metrics-server scrapes every 15 s by default;
	// two of its replicas, or a summary reader, share one sample).
	usageFresh = 5 * time.Second
	// usageStale: a provider's last good measure is served while its
	// usage call fails, until it is this old; then its pods have none.
	usageStale = 2 * time.Minute
)

// meter keeps the providers' last good measures and the cumulative CPU
// counters integrated from them. The counters are this process's own: each
// starts when this process first measures its container (its series'
// start, container_start_time_seconds), so metrics-server takes a new
// leader's counters as new containers, never as a jump of the old ones.
type meter struct {
	mu      sync.Mutex
	sampled time.Time
	last    []containerUse
	// nodeCPU is the node's cumulative CPU seconds: the sum of the
	// increments of every container's counter, so it never goes down when
	// a pod leaves; nodeAt is the latest measure that moved it.
	nodeCPU float64
	nodeAt  time.Time
	// byProvider is each provider's last good answer and when it came.
	byProvider map[string]providerUsage
	// counters are the cumulative CPU seconds, by workload id and
	// container, kept while the workload runs a pod here.
	counters map[counterKey]*cpuCounter
}

type providerUsage struct {
	at    time.Time
	items []provider.Usage
}

type counterKey struct{ id, container string }

// cpuCounter is one container's cumulative CPU seconds since start, as
// of the measure at.
type cpuCounter struct {
	seconds   float64
	start, at time.Time
}

// counterLead is how far before its first measure a counter starts: its
// first value is that measure's rate over it (never 0, which
// metrics-server takes as no measure).
const counterLead = time.Second

// containerUse is one container of a pod on this node, as measured.
type containerUse struct {
	pod        provider.PodRef
	container  string
	started    time.Time // the workload's start (zero: unknown)
	since      time.Time // the counter's start
	at         time.Time // of the measure
	cores      float64
	cpuSeconds float64
	memory     int64
}

// usage is the current measure of every container of the pods this node
// runs whose provider measures them, sampled again when the last sample
// is older than usageFresh. Pods at a provider that measures nothing, or
// not in its answer, or with a container whose working set is unknown,
// are absent.
func (n *Node) usage(ctx context.Context) (time.Time, float64, []containerUse) {
	m := &n.usageMeter
	m.mu.Lock()
	defer m.mu.Unlock()
	now := n.now()
	if !m.sampled.IsZero() && now.Sub(m.sampled) < usageFresh {
		return m.nodeAt, m.nodeCPU, m.last
	}
	if m.byProvider == nil {
		m.byProvider, m.counters = map[string]providerUsage{}, map[counterKey]*cpuCounter{}
	}
	n.askUsage(ctx, now)

	// The pods running here, by the id of their workload.
	n.mu.Lock()
	running := make(map[string]*remote, len(n.workloads))
	for _, r := range n.workloads {
		copied := *r
		running[r.w.ID] = &copied
	}
	n.mu.Unlock()

	var out []containerUse
	for name, pu := range m.byProvider {
		if now.Sub(pu.at) > usageStale {
			continue
		}
		for _, u := range pu.items {
			r := running[u.ID]
			if r == nil || r.member.Config.Name != name || r.w.Phase != provider.Running || !measured(u) {
				continue
			}
			var started time.Time
			if r.w.StartedAt != nil {
				started = *r.w.StartedAt
			}
			for _, c := range u.Containers {
				key := counterKey{u.ID, c.Name}
				cores := float64(c.CPU.MilliValue()) / 1000
				ctr := m.counters[key]
				switch {
				case ctr == nil:
					ctr = &cpuCounter{start: u.Time.Add(-counterLead), at: u.Time, seconds: max(cores*counterLead.Seconds(), 1e-6)}
					m.counters[key] = ctr
				case u.Time.After(ctr.at):
					inc := cores * u.Time.Sub(ctr.at).Seconds()
					ctr.seconds += inc
					ctr.at = u.Time
					m.nodeCPU += inc
					if u.Time.After(m.nodeAt) {
						m.nodeAt = u.Time
					}
				}
				out = append(out, containerUse{pod: r.w.Pod, container: c.Name, started: started, since: ctr.start, at: ctr.at,
					cores: cores, cpuSeconds: ctr.seconds, memory: c.Memory.Value()})
			}
		}
	}
	// Counters live as long as their workload runs a pod here: one
	// missing from an answer, or at a provider gone stale, goes on where
	// it was when it comes back.
	for key := range m.counters {
		if r := running[key.id]; r == nil {
			delete(m.counters, key)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.pod.Namespace != b.pod.Namespace {
			return a.pod.Namespace < b.pod.Namespace
		}
		if a.pod.Name != b.pod.Name {
			return a.pod.Name < b.pod.Name
		}
		if a.pod.UID != b.pod.UID {
			return a.pod.UID < b.pod.UID
		}
		return a.container < b.container
	})
	m.sampled, m.last = now, out
	return m.nodeAt, m.nodeCPU, out
}

// measured: every container of u has a working set (a provider that has
// none for one, e.g. a remote metrics API without memory, measured
// nothing of the pod: metrics-server would drop it whole anyway).
func measured(u provider.Usage) bool {
	for _, c := range u.Containers {
		if c.Memory.Sign() <= 0 {
			return false
		}
	}
	return len(u.Containers) > 0
}

// askUsage asks every provider that measures usage, at once, each within
// the request timeout, and keeps each good answer.
func (n *Node) askUsage(ctx context.Context, now time.Time) {
	m := &n.usageMeter
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, mem := range n.members {
		ur, ok := mem.Provider.(provider.UsageReader)
		if !ok {
			continue
		}
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout())
			defer cancel()
			items, err := ur.Usage(c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, provider.ErrUnsupported):
				delete(m.byProvider, mem.Config.Name)
			case err != nil:
				klog.FromContext(ctx).V(2).Info("Provider usage unavailable; its last measure stays in use until stale", "provider", mem.Config.Name, "err", err, "stale", usageStale)
			default:
				m.byProvider[mem.Config.Name] = providerUsage{at: now, items: items}
			}
		})
	}
	wg.Wait()
}

// resourceMetrics serves GET /metrics/resource as a kubelet does: what
// metrics-server scrapes.
func (n *Node) resourceMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newUsageCollector(n))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// usageCollector collects the current sample under the kubelet's names.
type usageCollector struct {
	n                                                          *Node
	nodeCPU, nodeMemory, podCPU, podMemory                     *prometheus.Desc
	containerCPU, containerMemory, containerStart, scrapeError *prometheus.Desc
}

func newUsageCollector(n *Node) *usageCollector {
	pod, container := []string{"namespace", "pod"}, []string{"container", "pod", "namespace"}
	return &usageCollector{n: n,
		nodeCPU:         prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node's measured containers in core-seconds", nil, nil),
		nodeMemory:      prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node's measured containers in bytes", nil, nil),
		podCPU:          prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", pod, nil),
		podMemory:       prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", pod, nil),
		containerCPU:    prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", container, nil),
		containerMemory: prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", container, nil),
		containerStart:  prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", container, nil),
		scrapeError:     prometheus.NewDesc("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.nodeCPU, c.nodeMemory, c.podCPU, c.podMemory, c.containerCPU, c.containerMemory, c.containerStart, c.scrapeError} {
		ch <- d
	}
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.n.cfg.RequestTimeout())
	defer cancel()
	nodeAt, nodeCPU, use := c.n.usage(ctx)
	ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 0)
	at := func(t time.Time, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.NewMetricWithTimestamp(t, prometheus.MustNewConstMetric(d, typ, v, labels...))
	}
	var memory int64
	for _, p := range byPod(use) {
		var cpu float64
		var mem int64
		last := p[0].at
		for _, u := range p {
			at(u.at, c.containerCPU, prometheus.CounterValue, u.cpuSeconds, u.container, u.pod.Name, u.pod.Namespace)
			at(u.at, c.containerMemory, prometheus.GaugeValue, float64(u.memory), u.container, u.pod.Name, u.pod.Namespace)
			// The series' start: metrics-server takes a counter that
			// starts after its last sample as a new container.
			at(u.at, c.containerStart, prometheus.GaugeValue, float64(u.since.UnixNano())/1e9, u.container, u.pod.Name, u.pod.Namespace)
			cpu += u.cpuSeconds
			mem += u.memory
			if u.at.After(last) {
				last = u.at
			}
		}
		at(last, c.podCPU, prometheus.CounterValue, cpu, p[0].pod.Namespace, p[0].pod.Name)
		at(last, c.podMemory, prometheus.GaugeValue, float64(mem), p[0].pod.Namespace, p[0].pod.Name)
		memory += mem
	}
	if len(use) > 0 && nodeCPU > 0 {
		at(nodeAt, c.nodeCPU, prometheus.CounterValue, nodeCPU)
		at(nodeAt, c.nodeMemory, prometheus.GaugeValue, float64(memory))
	}
}

// byPod groups a sorted sample by pod.
func byPod(use []containerUse) [][]containerUse {
	var out [][]containerUse
	for i := 0; i < len(use); {
		j := i
		for j < len(use) && use[j].pod == use[i].pod {
			j++
		}
		out = append(out, use[i:j])
		i = j
	}
	return out
}

// statsSummary serves GET /stats/summary as a kubelet does, for the pods
// that are measured; pods bound here that are not are listed without CPU
// and memory (none, not zero).
func (n *Node) statsSummary(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*n.cfg.RequestTimeout())
	defer cancel()
	nodeAt, nodeCPU, use := n.usage(ctx)
	measured := map[types.UID][]containerUse{}
	for _, p := range byPod(use) {
		measured[p[0].pod.UID] = p
	}
	sum := statsapi.Summary{Node: statsapi.NodeStats{NodeName: n.cfg.NodeName}}
	pods, err := n.pods.List(labels.Everything())
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name })
	var memory uint64
	for _, pod := range pods {
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		}
		containers := measured[pod.UID]
		if len(containers) == 0 {
			for _, c := range pod.Spec.Containers {
				ps.Containers = append(ps.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: ps.StartTime})
			}
			sum.Pods = append(sum.Pods, ps)
			continue
		}
		var podNano, podCPU, podMem uint64
		last := containers[0].at
		for _, u := range containers {
			cs := statsapi.ContainerStats{Name: u.container, StartTime: metav1.NewTime(u.started),
				CPU:    cpuStats(u.at, u.cores, u.cpuSeconds),
				Memory: &statsapi.MemoryStats{Time: metav1.NewTime(u.at), WorkingSetBytes: ptrTo(uint64(u.memory))}}
			ps.Containers = append(ps.Containers, cs)
			podNano += *cs.CPU.UsageNanoCores
			podCPU += *cs.CPU.UsageCoreNanoSeconds
			podMem += uint64(u.memory)
			if u.at.After(last) {
				last = u.at
			}
		}
		ps.CPU = &statsapi.CPUStats{Time: metav1.NewTime(last), UsageNanoCores: &podNano, UsageCoreNanoSeconds: &podCPU}
		ps.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(last), WorkingSetBytes: &podMem}
		memory += podMem
		sum.Pods = append(sum.Pods, ps)
	}
	if len(use) > 0 && nodeCPU > 0 {
		var nano uint64
		for _, u := range use {
			nano += uint64(u.cores * 1e9)
		}
		nodeNano := uint64(nodeCPU * 1e9)
		sum.Node.CPU = &statsapi.CPUStats{Time: metav1.NewTime(nodeAt), UsageNanoCores: &nano, UsageCoreNanoSeconds: &nodeNano}
		sum.Node.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(nodeAt), WorkingSetBytes: &memory}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&sum)
}

func cpuStats(at time.Time, cores, seconds float64) *statsapi.CPUStats {
	return &statsapi.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: ptrTo(uint64(cores * 1e9)), UsageCoreNanoSeconds: ptrTo(uint64(seconds * 1e9))}
}

func ptrTo[T any](v T) *T { return &v }
