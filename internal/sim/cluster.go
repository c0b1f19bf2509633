// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
)

// GPU is the GPU resource of simulated nodes and pods.
const GPU = v1.ResourceName(configv1.DefaultGPUResourceName)

// Namespace is where simulated pods live.
const Namespace = "default"

// NodeSpec is a simulated node.
type NodeSpec struct {
	Name string
	// Leaf, Spine and Block are its switches ("" when unknown).
	Leaf, Spine, Block string
	GPUs               int
	MilliCPU           int64
	MemoryMiB          int64
	Labels             map[string]string
}

// Node is the Kubernetes node of a spec, Ready, with the fabric in
// Topograph's labels (sluice's defaults).
func (n NodeSpec) Node() *v1.Node {
	cpu, mem := n.MilliCPU, n.MemoryMiB
	if cpu == 0 {
		cpu = 128000
	}
	if mem == 0 {
		mem = 1 << 20
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem<<20, resource.BinarySI),
		v1.ResourcePods:   resource.MustParse("250"),
		GPU:               *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
	}
	labels := map[string]string{v1.LabelHostname: n.Name}
	for k, v := range map[string]string{configv1.DefaultLeafLabel: n.Leaf, configv1.DefaultSpineLabel: n.Spine, configv1.DefaultBlockLabel: n.Block} {
		if v != "" {
			labels[k] = v
		}
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: v1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}
}

// Fabric is a regular fabric: blocks x spines x leaves x nodes, each node
// with gpus GPUs. Names are b<b>s<s>l<l>n<n>.
func Fabric(blocks, spines, leaves, nodes, gpus int) []NodeSpec {
	var out []NodeSpec
	for b := 0; b < blocks; b++ {
		for s := 0; s < spines; s++ {
			for l := 0; l < leaves; l++ {
				for n := 0; n < nodes; n++ {
					out = append(out, NodeSpec{
						Name:  fmt.Sprintf("b%ds%dl%dn%02d", b, s, l, n),
						Leaf:  fmt.Sprintf("b%ds%dl%d", b, s, l),
						Spine: fmt.Sprintf("b%ds%d", b, s),
						Block: fmt.Sprintf("b%d", b),
						GPUs:  gpus,
					})
				}
			}
		}
	}
	return out
}

// PodSpec is a simulated pod's requests.
type PodSpec struct {
	Name      string
	GPUs      int
	MilliCPU  int64
	MemoryMiB int64
	// Research pods use the policy's research profile and PriorityClass.
	Research bool
	// Gang names the native PodGroup the pod belongs to.
	Gang string
}

// Pod builds the pod for a policy.
func (p PodSpec) Pod(policy Policy) *v1.Pod {
	req := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(max(p.MilliCPU, 100), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(max(p.MemoryMiB, 128)<<20, resource.BinarySI),
	}
	limits := v1.ResourceList{}
	if p.GPUs > 0 {
		req[GPU] = *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
		limits[GPU] = req[GPU]
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: p.Name, Labels: map[string]string{"sim": "true"}},
		Spec: v1.PodSpec{
			SchedulerName:                 policy.Production,
			PriorityClassName:             "production",
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: req, Limits: limits}}},
		},
	}
	if p.Research {
		pod.Spec.SchedulerName = policy.Research
		pod.Spec.PriorityClassName = "research"
	}
	if p.Gang != "" {
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(p.Gang)}
	}
	return pod
}
