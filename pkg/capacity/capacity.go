// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package capacity answers "how many more pods shaped like this one fit on
// this node?", the per-node number that fabric placement and overflow
// preemption sum over the fabric tree.
package capacity

import (
	"math"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Shape is what one pod requests.
type Shape struct {
	MilliCPU int64
	Memory   int64
	Scalar   map[v1.ResourceName]int64

	pod      *v1.Pod
	affinity nodeaffinity.RequiredNodeAffinity
}

// ShapeOf is the shape of pod. For a gang, pass its largest member.
func ShapeOf(pod *v1.Pod) Shape {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	s := Shape{Scalar: map[v1.ResourceName]int64{}, pod: pod, affinity: nodeaffinity.GetRequiredNodeAffinity(pod)}
	for name, q := range reqs {
		switch name {
		case v1.ResourceCPU:
			s.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			s.Memory = q.Value()
		case v1.ResourcePods, v1.ResourceEphemeralStorage:
		default:
			if q.Value() > 0 {
				s.Scalar[name] = q.Value()
			}
		}
	}
	return s
}

// Largest returns the pod of pods with the most of resource (then the most
// CPU), the conservative template for a gang of mixed pods.
func Largest(pods []*v1.Pod, resource v1.ResourceName) *v1.Pod {
	var best *v1.Pod
	var bestR, bestCPU int64
	for _, p := range pods {
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		r, cpu := reqs.Name(resource, "").Value(), reqs.Cpu().MilliValue()
		if best == nil || r > bestR || (r == bestR && cpu > bestCPU) {
			best, bestR, bestCPU = p, r, cpu
		}
	}
	return best
}

// Eligible reports whether the pod may run on the node at all, whatever the
// free resources: the node is schedulable (or tolerated), has no NoSchedule
// or NoExecute taint the pod does not tolerate, and matches its node
// selector and required node affinity.
func (s Shape) Eligible(node *v1.Node) bool {
	if node == nil {
		return false
	}
	if node.Spec.Unschedulable && !tolerates(s.pod, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
		return false
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, s.pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	ok, _ := s.affinity.Match(node)
	return ok
}

func tolerates(pod *v1.Pod, taint *v1.Taint) bool {
	return v1helper.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false)
}

// Resources is an amount of node resources: what is free on a node, or
// what a pod requests.
type Resources struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
	Scalar   map[v1.ResourceName]int64
}

// FreeOf is what is free on a node: allocatable minus requested, minus
// `held` (resources held outside Kubernetes, e.g. GPUs in Slurm jobs).
func FreeOf(ni fwk.NodeInfo, held map[v1.ResourceName]int64) Resources {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	free := Resources{
		MilliCPU: alloc.GetMilliCPU() - used.GetMilliCPU(),
		Memory:   alloc.GetMemory() - used.GetMemory(),
		Pods:     int64(alloc.GetAllowedPodNumber() - len(ni.GetPods())),
		Scalar:   map[v1.ResourceName]int64{},
	}
	usedScalar := used.GetScalarResources()
	for name, a := range alloc.GetScalarResources() {
		free.Scalar[name] = a - usedScalar[name] - held[name]
	}
	return free
}

// RequestsOf is what a pod requests, as Resources (Pods = 1).
func RequestsOf(pod *v1.Pod) Resources {
	s := ShapeOf(pod)
	return Resources{MilliCPU: s.MilliCPU, Memory: s.Memory, Pods: 1, Scalar: s.Scalar}
}

// Add returns r plus o (e.g. free resources with a victim's requests given
// back).
func (r Resources) Add(o Resources) Resources {
	out := Resources{MilliCPU: r.MilliCPU + o.MilliCPU, Memory: r.Memory + o.Memory, Pods: r.Pods + o.Pods,
		Scalar: make(map[v1.ResourceName]int64, len(r.Scalar))}
	for k, v := range r.Scalar {
		out.Scalar[k] = v
	}
	for k, v := range o.Scalar {
		out.Scalar[k] += v
	}
	return out
}

// Sub returns r minus o.
func (r Resources) Sub(o Resources) Resources {
	neg := Resources{MilliCPU: -o.MilliCPU, Memory: -o.Memory, Pods: -o.Pods, Scalar: make(map[v1.ResourceName]int64, len(o.Scalar))}
	for k, v := range o.Scalar {
		neg.Scalar[k] = -v
	}
	return r.Add(neg)
}

// Covers reports whether r is at least o in every resource o has.
func (r Resources) Covers(o Resources) bool {
	if r.MilliCPU < o.MilliCPU || r.Memory < o.Memory || r.Pods < o.Pods {
		return false
	}
	for k, v := range o.Scalar {
		if r.Scalar[k] < v {
			return false
		}
	}
	return true
}

// Fit is how many pods of this shape fit in free resources, ignoring
// whether the pod may run on the node at all (see Eligible).
func (s Shape) Fit(free Resources) int {
	slots := free.Pods
	fit := func(have, want int64) {
		if want > 0 {
			slots = min(slots, max(have, 0)/want)
		}
	}
	fit(free.MilliCPU, s.MilliCPU)
	fit(free.Memory, s.Memory)
	for name, want := range s.Scalar {
		fit(free.Scalar[name], want)
	}
	if slots > math.MaxInt32 {
		slots = math.MaxInt32
	}
	return int(max(slots, 0))
}

// Slots is how many more pods of this shape fit on the node: Fit of its
// free resources (minus `held`), or 0 if the pod is not Eligible there.
func (s Shape) Slots(ni fwk.NodeInfo, held map[v1.ResourceName]int64) int {
	if !s.Eligible(ni.Node()) {
		return 0
	}
	return s.Fit(FreeOf(ni, held))
}

// Free is the node's free amount of a scalar resource (e.g. GPUs), minus
// what is held outside Kubernetes.
func Free(ni fwk.NodeInfo, resource v1.ResourceName, held int64) int64 {
	return max(ni.GetAllocatable().GetScalarResources()[resource]-ni.GetRequested().GetScalarResources()[resource]-held, 0)
}

// ResourcesOf is a resource list as Resources (what a pod requests, say).
func ResourcesOf(list v1.ResourceList) Resources {
	r := Resources{Scalar: map[v1.ResourceName]int64{}}
	for name, q := range list {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case v1.ResourceMemory:
			r.Memory = q.Value()
		case v1.ResourcePods:
			r.Pods = q.Value()
		case v1.ResourceEphemeralStorage:
		default:
			r.Scalar[name] = q.Value()
		}
	}
	return r
}
