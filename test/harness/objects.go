// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
)

// GPU is the GPU extended resource the builders use.
const GPU v1.ResourceName = configv1.DefaultGPUResourceName

// Overflow node conventions of virtual-kubelet, which sluice defaults to.
const (
	OverflowLabelKey   = "type"
	OverflowLabelValue = "virtual-kubelet"
	OverflowTaintKey   = "virtual-kubelet.io/provider"
)

// NodeBuilder builds a Node.
type NodeBuilder struct{ node *v1.Node }

// GPUNode is a Ready node with gpus GPUs, 128 CPUs and 1 TiB of memory.
func GPUNode(name string, gpus int) *NodeBuilder {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("128"),
		v1.ResourceMemory: resource.MustParse("1Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
		GPU:               *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &NodeBuilder{node: &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
		},
	}}
}

// OverflowNode is a virtual-kubelet overflow node (label type=virtual-kubelet,
// taint virtual-kubelet.io/provider=sluice:NoSchedule) with gpus GPUs and
// room for 5000 pods.
func OverflowNode(name string, gpus int) *NodeBuilder {
	b := GPUNode(name, gpus).Label(OverflowLabelKey, OverflowLabelValue)
	// External capacity: many pods, plenty of CPU and memory.
	for _, rl := range []v1.ResourceList{b.node.Status.Capacity, b.node.Status.Allocatable} {
		rl[v1.ResourceCPU] = resource.MustParse("10000")
		rl[v1.ResourceMemory] = resource.MustParse("100Ti")
		rl[v1.ResourcePods] = resource.MustParse("5000")
	}
	b.node.Spec.Taints = append(b.node.Spec.Taints, v1.Taint{Key: OverflowTaintKey, Value: "sluice", Effect: v1.TaintEffectNoSchedule})
	return b
}

// Fabric puts the node under a leaf, spine and block switch, with
// Topograph's label keys (sluice's default fabric levels). Empty names are
// left out, as on a node the fabric discovery missed.
func (b *NodeBuilder) Fabric(leaf, spine, block string) *NodeBuilder {
	for key, value := range map[string]string{
		configv1.DefaultLeafLabel: leaf, configv1.DefaultSpineLabel: spine, configv1.DefaultBlockLabel: block,
	} {
		if value != "" {
			b.node.Labels[key] = value
		}
	}
	return b
}

// Label sets a label.
func (b *NodeBuilder) Label(key, value string) *NodeBuilder {
	b.node.Labels[key] = value
	return b
}

// NotReady makes the node report Ready=False.
func (b *NodeBuilder) NotReady() *NodeBuilder {
	b.node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady"}}
	return b
}

// Obj returns the node.
func (b *NodeBuilder) Obj() *v1.Node { return b.node.DeepCopy() }

// PodBuilder builds a Pod.
type PodBuilder struct{ pod *v1.Pod }

// Pod is a one-container pod in namespace ns with small CPU and memory
// requests, scheduled by sluice's production profile unless told otherwise.
func Pod(ns, name string) *PodBuilder {
	return &PodBuilder{pod: &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec: v1.PodSpec{
			SchedulerName:                 "sluice-production",
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{
				Name:  "main",
				Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")},
				},
			}},
		},
	}}
}

// Scheduler sets spec.schedulerName ("" leaves it to the default scheduler).
func (b *PodBuilder) Scheduler(name string) *PodBuilder {
	b.pod.Spec.SchedulerName = name
	return b
}

// GPUs requests n GPUs (requests equal limits, as extended resources must).
func (b *PodBuilder) GPUs(n int) *PodBuilder {
	q := *resource.NewQuantity(int64(n), resource.DecimalSI)
	c := &b.pod.Spec.Containers[0]
	c.Resources.Requests[GPU] = q
	if c.Resources.Limits == nil {
		c.Resources.Limits = v1.ResourceList{}
	}
	c.Resources.Limits[GPU] = q
	return b
}

// PriorityClass sets spec.priorityClassName.
func (b *PodBuilder) PriorityClass(name string) *PodBuilder {
	b.pod.Spec.PriorityClassName = name
	return b
}

// Label sets a label.
func (b *PodBuilder) Label(key, value string) *PodBuilder {
	b.pod.Labels[key] = value
	return b
}

// Annotation sets an annotation.
func (b *PodBuilder) Annotation(key, value string) *PodBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[key] = value
	return b
}

// SchedulingGroup makes the pod a member of the native PodGroup name.
func (b *PodBuilder) SchedulingGroup(name string) *PodBuilder {
	b.pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	return b
}

// TolerateOverflow lets the pod run on overflow nodes.
func (b *PodBuilder) TolerateOverflow() *PodBuilder {
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, v1.Toleration{Key: OverflowTaintKey, Operator: v1.TolerationOpExists})
	return b
}

// Obj returns the pod.
func (b *PodBuilder) Obj() *v1.Pod { return b.pod.DeepCopy() }

// CreatePods creates pods.
func CreatePods(t testing.TB, cs kubernetes.Interface, pods ...*v1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}

// OnNode binds the pod to a node directly, bypassing every scheduler (a
// filler that occupies resources).
func (b *PodBuilder) OnNode(name string) *PodBuilder {
	b.pod.Spec.NodeName = name
	return b
}

// SchedulingGate adds a scheduling gate: no scheduler considers the pod
// until the gate is removed.
func (b *PodBuilder) SchedulingGate(name string) *PodBuilder {
	b.pod.Spec.SchedulingGates = append(b.pod.Spec.SchedulingGates, v1.PodSchedulingGate{Name: name})
	return b
}

// NativePodGroup is a scheduling.k8s.io/v1beta1 gang PodGroup.
func NativePodGroup(ns, name string, minCount int32, annotations map[string]string) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount},
			},
		},
	}
}

// LabelPodGroup is a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1).
func LabelPodGroup(ns, name string, minMember int32, timeoutSeconds int32, annotations map[string]string) *unstructured.Unstructured {
	spec := map[string]any{"minMember": int64(minMember)}
	if timeoutSeconds > 0 {
		spec["scheduleTimeoutSeconds"] = int64(timeoutSeconds)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1",
		"kind":       "PodGroup",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// LabelPodGroupResource is the scheduler-plugins PodGroup resource.
var LabelPodGroupResource = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// CreateLabelPodGroup creates a scheduler-plugins PodGroup.
func CreateLabelPodGroup(t testing.TB, cp *ControlPlane, pg *unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(LabelPodGroupResource).Namespace(pg.GetNamespace()).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", pg.GetNamespace(), pg.GetName(), err)
	}
}

// CreateNativePodGroup creates a scheduling.k8s.io/v1beta1 PodGroup.
func CreateNativePodGroup(t testing.TB, cs kubernetes.Interface, pg *schedulingv1beta1.PodGroup) {
	t.Helper()
	if _, err := cs.SchedulingV1beta1().PodGroups(pg.Namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", pg.Namespace, pg.Name, err)
	}
}

// NewNameSuffix is a short random suffix for names that must not clash
// between tests (cluster-scoped objects, Leases).
func NewNameSuffix() string { return rand.String(5) }

// DeletePods deletes pods at once (grace period 0) and waits until they
// are gone.
func DeletePods(t testing.TB, cs kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
		}
	}
	WaitForPodsGone(t, cs, ns, names...)
}
