// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Node identity: the virtual-kubelet conventions sluice's OverflowPreemption
// selects overflow nodes by.
const (
	LabelType     = "type"
	TypeValue     = "virtual-kubelet"
	TaintKey      = "virtual-kubelet.io/provider"
	TaintValue    = "sluice"
	KubeletString = "sluice-overflow-node"
)

// unlimitedResources is what the node advertises for a resource that a
// healthy provider does not report (and so does not limit).
func unlimitedResources() map[v1.ResourceName]resource.Quantity {
	return map[v1.ResourceName]resource.Quantity{
		v1.ResourceCPU:              resource.MustParse("100000"),
		v1.ResourceMemory:           resource.MustParse("1000Ti"),
		v1.ResourceEphemeralStorage: resource.MustParse("1000Ti"),
	}
}

// statusFor translates a remote workload into the pod's status. The pod is
// Ready only when the remote side serves; conditions keep their transition
// times while their status does not change, so an unchanged workload
// yields an unchanged status.
func (n *Node) statusFor(pod *v1.Pod, r *remote) v1.PodStatus {
	st := *pod.Status.DeepCopy()
	now := metav1.NewTime(n.now())
	w := r.w
	ready := w.Phase == provider.Running && w.Ready
	st.Reason, st.Message = "", ""
	switch w.Phase {
	case provider.Running:
		st.Phase = v1.PodRunning
	case provider.Succeeded:
		st.Phase = v1.PodSucceeded
	case provider.Failed:
		st.Phase = v1.PodFailed
		st.Reason = ReasonRemoteFailed
		st.Message = fmt.Sprintf("provider %s: %s", r.member.Config.Name, w.Message)
	default:
		st.Phase = v1.PodPending
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	if ips := podIPs(w.Addresses); len(ips) > 0 {
		st.PodIPs = ips
		st.PodIP = ips[0].IP
	}
	if k := n.cfg.KubeletAPI; k != nil {
		st.HostIP, st.HostIPs = k.Address, []v1.HostIP{{IP: k.Address}}
	}
	started := st.StartTime
	if w.StartedAt != nil {
		t := metav1.NewTime(*w.StartedAt)
		started = &t
	}
	notReady := w.Message
	if notReady == "" {
		notReady = "remote workload is " + strings.ToLower(string(w.Phase))
	}
	setCondition(&st, now, RemoteCondition, true, r.member.Config.Name, fmt.Sprintf("runs as %s at provider %s", w.ID, r.member.Config.Name))
	setCondition(&st, now, v1.PodInitialized, true, "", "")
	setCondition(&st, now, v1.ContainersReady, ready, reasonIf(!ready, "RemoteNotReady"), messageIf(!ready, notReady))
	setCondition(&st, now, v1.PodReady, ready, reasonIf(!ready, "RemoteNotReady"), messageIf(!ready, notReady))

	st.ContainerStatuses = make([]v1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		cs := v1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: ready,
			ContainerID: fmt.Sprintf("sluice://%s/%s/%s", r.member.Config.Name, w.ID, c.Name),
			Started:     boolPtr(w.Phase == provider.Running),
		}
		switch w.Phase {
		case provider.Running:
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: *started}
		case provider.Succeeded:
			cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: *started}
		case provider.Failed:
			cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: w.Message, StartedAt: *started}
		default:
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "RemotePending", Message: w.Message}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

// podIPs are a workload's usable addresses (provider.UsableAddress), at
// most one of each family, in canonical form.
func podIPs(addresses []string) []v1.PodIP {
	var out []v1.PodIP
	var v4, v6 bool
	for _, a := range addresses {
		if provider.UsableAddress(a) != nil {
			continue
		}
		ip := netip.MustParseAddr(a).Unmap()
		if ip.Is4() && !v4 || ip.Is6() && !v6 {
			v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
			out = append(out, v1.PodIP{IP: ip.String()})
		}
	}
	return out
}

// terminatedStatus is the pod's status with every container terminated.
func terminatedStatus(pod *v1.Pod, phase v1.PodPhase, reason, msg string, exitCode int32) v1.PodStatus {
	st := *pod.Status.DeepCopy()
	now := metav1.Now()
	st.Phase, st.Reason, st.Message = phase, reason, msg
	setCondition(&st, now, v1.ContainersReady, false, reason, msg)
	setCondition(&st, now, v1.PodReady, false, reason, msg)
	statuses := make([]v1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: boolPtr(false)}
		for _, old := range st.ContainerStatuses {
			if old.Name == c.Name {
				cs.ContainerID = old.ContainerID
			}
		}
		cs.State.Terminated = &v1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, Message: msg, FinishedAt: now}
		statuses = append(statuses, cs)
	}
	st.ContainerStatuses = statuses
	return st
}

func setCondition(st *v1.PodStatus, now metav1.Time, typ v1.PodConditionType, ok bool, reason, msg string) {
	status := v1.ConditionFalse
	if ok {
		status = v1.ConditionTrue
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	st.Conditions = append(st.Conditions, v1.PodCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
}

// statusEqual compares statuses, ignoring probe times.
func statusEqual(a, b v1.PodStatus) bool {
	return apiequality.Semantic.DeepEqual(withoutProbeTimes(a), withoutProbeTimes(b))
}

func withoutProbeTimes(st v1.PodStatus) v1.PodStatus {
	st = *st.DeepCopy()
	for i := range st.Conditions {
		st.Conditions[i].LastProbeTime = metav1.Time{}
	}
	return st
}

func reasonIf(cond bool, reason string) string {
	if cond {
		return reason
	}
	return ""
}

func messageIf(cond bool, msg string) string {
	if cond {
		return msg
	}
	return ""
}

func boolPtr(b bool) *bool { return &b }

// NodeObject is the node this process registers.
func (n *Node) NodeObject() *v1.Node {
	node := &v1.Node{}
	node.Name = n.cfg.NodeName
	node.Labels = map[string]string{
		LabelType:                    TypeValue,
		v1.LabelHostname:             n.cfg.NodeName,
		v1.LabelOSStable:             "linux",
		v1.LabelArchStable:           runtime.GOARCH,
		"kubernetes.io/role":         "agent",
		v1.LabelNodeExcludeBalancers: "true",
	}
	for k, v := range n.cfg.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = []v1.Taint{{Key: TaintKey, Value: TaintValue, Effect: v1.TaintEffectNoSchedule}}
	n.mu.Lock()
	node.Status = n.nodeStatusLocked(nil)
	published := n.offerLocked()
	n.mu.Unlock()
	if value, err := published.Encode(); err == nil {
		node.Annotations = map[string]string{offer.Annotation: value}
	}
	return node
}

// offerLocked is what the node offers, per provider in dispatch order (the
// scheduler counts each victim against one provider that can hold it), and
// what each carries (the scheduler moves and binds here only pods one of
// them can run).
// Called with n.mu.
func (n *Node) offerLocked() offer.Offer {
	var o offer.Offer
	for _, m := range n.members {
		carries := m.Provider.Carries()
		p := offer.Provider{Name: m.Config.Name, Healthy: m.healthy, Capacity: m.capacity.DeepCopy(), Carries: &carries,
			Namespaces: m.Config.Namespaces}
		if !m.unlistedSince.IsZero() {
			p.UnlistedSince = &metav1.Time{Time: m.unlistedSince}
		}
		o.Providers = append(o.Providers, p)
	}
	// Said while the node is set to read claims, also before it has: a
	// slow start does not turn claims break-before-make.
	o.Warm = n.claims != nil
	return o
}

// nodeStatusLocked is the node's status: capacity is the sum over healthy
// providers (quota applied) plus the pod limit; Ready is True while any
// provider is healthy, or still lists its workloads (no pods are taken
// then: a node NotReady would have its pods tainted away, though they
// serve). Transition times are kept from prev when a
// condition does not change. Called with n.mu.
func (n *Node) nodeStatusLocked(prev *v1.NodeStatus) v1.NodeStatus {
	capacity := v1.ResourceList{}
	var healthy, unhealthy []string
	listing := 0
	unlimited := map[v1.ResourceName]bool{}
	for _, m := range n.members {
		if m.listed {
			listing++
		}
		if !m.healthy {
			unhealthy = append(unhealthy, fmt.Sprintf("%s (%v)", m.Config.Name, m.err))
			continue
		}
		healthy = append(healthy, m.Config.Name)
		for name, q := range m.capacity {
			sum := capacity[name]
			sum.Add(q)
			capacity[name] = sum
		}
		for name := range unlimitedResources() {
			if _, ok := m.capacity[name]; !ok {
				unlimited[name] = true
			}
		}
	}
	// A provider that does not report CPU, memory or storage does not
	// limit them (dispatch agrees, see shortfall): advertise plenty.
	for name := range unlimited {
		capacity[name] = unlimitedResources()[name].DeepCopy()
	}
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(*n.cfg.MaxPods), resource.DecimalSI)
	if len(healthy) == 0 {
		// No provider takes pods: nothing may be scheduled here.
		capacity = v1.ResourceList{v1.ResourcePods: resource.MustParse("0")}
	}
	now := metav1.NewTime(n.now())
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "ProvidersHealthy",
		Message: fmt.Sprintf("%d of %d providers healthy: %s", len(healthy), len(n.members), strings.Join(healthy, ", "))}
	if len(unhealthy) > 0 {
		ready.Message += "; unhealthy: " + strings.Join(unhealthy, ", ")
	}
	switch {
	case len(healthy) == 0 && listing > 0:
		ready.Reason = "NoProviderTakesPods"
		ready.Message = fmt.Sprintf("no provider takes new pods (%s); %d still list their workloads, which go on serving", strings.Join(unhealthy, ", "), listing)
	case len(healthy) == 0:
		ready.Status, ready.Reason = v1.ConditionFalse, "NoHealthyProvider"
		ready.Message = "no provider is healthy: " + strings.Join(unhealthy, ", ")
	}
	conds := []v1.NodeCondition{
		ready,
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "ExternalCapacity"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "ExternalCapacity"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "ExternalCapacity"},
		{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionFalse, Reason: "ExternalCapacity"},
	}
	for i := range conds {
		conds[i].LastTransitionTime, conds[i].LastHeartbeatTime = now, now
		if prev == nil {
			continue
		}
		for _, p := range prev.Conditions {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	st := v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Conditions:  conds,
		Addresses:   []v1.NodeAddress{{Type: v1.NodeHostName, Address: n.cfg.NodeName}},
		NodeInfo: v1.NodeSystemInfo{
			OperatingSystem: "linux", Architecture: runtime.GOARCH,
			KubeletVersion: KubeletString,
		},
	}
	if k := n.cfg.KubeletAPI; k != nil {
		// The apiserver proxies logs to the first address of its
		// preferred types (Hostname first by default): only the one it
		// can reach is published.
		st.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: k.Address}}
		st.DaemonEndpoints.KubeletEndpoint.Port = k.Port
	}
	return st
}

// nodeStatusChanged compares what matters of two node statuses.
func nodeStatusChanged(a, b *v1.NodeStatus) bool {
	if a == nil || b == nil {
		return true
	}
	if !apiequality.Semantic.DeepEqual(a.Allocatable, b.Allocatable) || len(a.Conditions) != len(b.Conditions) {
		return true
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return true
		}
	}
	return false
}
