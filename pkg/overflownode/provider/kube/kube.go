// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package kube is the "kubernetes" overflow provider: a second cluster,
// reached by kubeconfig, runs each overflowed pod as a pod of its own in
// one namespace. It is the common burst target (another region, a GPU
// cloud's managed Kubernetes).
//
// A remote pod is named by the id sluice assigned and carries the overflow
// node's name and the home pod's namespace, name and UID as labels and
// annotations; nothing else is kept anywhere.
package kube

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Labels and annotations on remote pods.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedBy        = "sluice-overflow-node"
	LabelNode        = "overflow.sluice.dev/node"
	LabelPodUID      = "overflow.sluice.dev/pod-uid"
	AnnotationPodNS  = "overflow.sluice.dev/pod-namespace"
	AnnotationPodNam = "overflow.sluice.dev/pod-name"
)

// Provider runs workloads as pods in a namespace of another cluster.
type Provider struct {
	client    kubernetes.Interface
	namespace string
	node      string
}

// New returns a provider that creates pods in namespace through client,
// on behalf of the overflow node named node.
func New(client kubernetes.Interface, namespace, node string) *Provider {
	return &Provider{client: client, namespace: namespace, node: node}
}

// FromKubeconfig builds a provider from a kubeconfig file.
func FromKubeconfig(path, namespace, node string) (*Provider, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = "sluice-overflow-node"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return New(client, namespace, node), nil
}

var _ provider.Provider = &Provider{}

// Create creates the remote pod.
func (p *Provider) Create(ctx context.Context, id string, pod *v1.Pod) error {
	remote, err := RemotePod(id, p.node, p.namespace, pod)
	if err != nil {
		return err
	}
	_, err = p.client.CoreV1().Pods(p.namespace).Create(ctx, remote, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		// The remote cluster refuses this pod as written (admission,
		// quota, policy): say so, do not hammer it.
		return fmt.Errorf("%w: remote cluster refused pod: %v", provider.ErrUnsupported, err)
	}
	return err
}

// Carries is what the provider carries: scratch space and env from the
// container's own resources, nothing of the home cluster's.
func (p *Provider) Carries() offer.Carries { return carries() }

func carries() offer.Carries { return offer.Carries{Volumes: []string{"emptyDir"}, ResourceEnv: true} }

// Delete deletes the remote pod.
func (p *Provider) Delete(ctx context.Context, id string) error {
	err := p.client.CoreV1().Pods(p.namespace).Delete(ctx, id, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Get reads one remote pod.
func (p *Provider) Get(ctx context.Context, id string) (*provider.Workload, error) {
	pod, err := p.client.CoreV1().Pods(p.namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: %w", id, provider.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if pod.Labels[LabelNode] != p.node || pod.Labels[LabelManagedBy] != ManagedBy {
		return nil, fmt.Errorf("%s is not managed by overflow node %s: %w", id, p.node, provider.ErrNotFound)
	}
	w := workloadOf(pod)
	return &w, nil
}

// List lists this node's remote pods.
func (p *Provider) List(ctx context.Context) ([]provider.Workload, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelNode: p.node})
	pods, err := p.client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := make([]provider.Workload, 0, len(pods.Items))
	for i := range pods.Items {
		out = append(out, workloadOf(&pods.Items[i]))
	}
	return out, nil
}

// Capacity is the allocatable of the remote cluster's Ready, schedulable
// nodes: what this node could use if nothing else ran there. Quotas in the
// overflow node's configuration cap it.
func (p *Provider) Capacity(ctx context.Context) (v1.ResourceList, error) {
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	total := v1.ResourceList{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !ready(n) || hardTainted(n) {
			continue
		}
		for name, q := range n.Status.Allocatable {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	return total, nil
}

// Health checks that the remote apiserver answers and this node may list
// pods in its namespace.
func (p *Provider) Health(ctx context.Context) error {
	_, err := p.client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("listing pods in %s: %w", p.namespace, err)
	}
	return nil
}

func ready(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// hardTainted reports NoSchedule/NoExecute taints; the remote pods
// tolerate none.
func hardTainted(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// workloadOf reads a remote pod as a workload.
func workloadOf(pod *v1.Pod) provider.Workload {
	w := provider.Workload{
		ID:   pod.Name,
		Node: pod.Labels[LabelNode],
		Pod: provider.PodRef{
			Namespace: pod.Annotations[AnnotationPodNS],
			Name:      pod.Annotations[AnnotationPodNam],
			UID:       types.UID(pod.Labels[LabelPodUID]),
		},
	}
	switch pod.Status.Phase {
	case v1.PodRunning:
		w.Phase = provider.Running
	case v1.PodSucceeded:
		w.Phase = provider.Succeeded
	case v1.PodFailed:
		w.Phase = provider.Failed
	default:
		w.Phase = provider.Pending
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			w.Ready = c.Status == v1.ConditionTrue && pod.DeletionTimestamp == nil
		}
	}
	if pod.Status.StartTime != nil {
		t := pod.Status.StartTime.Time
		w.StartedAt = &t
	}
	if !w.Ready {
		w.Message = messageOf(pod)
	}
	return w
}

// messageOf explains a remote pod that does not serve.
func messageOf(pod *v1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "remote pod is terminating"
	}
	if pod.Status.Message != "" {
		return pod.Status.Message
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf("container %s: %s %s", cs.Name, w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s terminated: %s (exit %d) %s", cs.Name, t.Reason, t.ExitCode, t.Message)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != v1.ConditionTrue && c.Message != "" {
			return fmt.Sprintf("%s: %s", c.Type, c.Message)
		}
	}
	return "remote pod is " + strings.ToLower(string(pod.Status.Phase))
}

// RemotePod translates a home pod into the pod the remote cluster runs.
// What only makes sense at home (node name, affinity, tolerations of home
// taints, priority class, scheduler name, service account token) is left
// out; what cannot be carried over fails with provider.ErrUnsupported
// naming the field (provider.Portable).
func RemotePod(id, node, namespace string, pod *v1.Pod) (*v1.Pod, error) {
	p, err := provider.Portable(pod, carries())
	if err != nil {
		return nil, err
	}
	lbls := map[string]string{}
	for k, v := range pod.Labels {
		lbls[k] = v
	}
	lbls[LabelManagedBy] = ManagedBy
	lbls[LabelNode] = node
	lbls[LabelPodUID] = string(pod.UID)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        id,
			Namespace:   namespace,
			Labels:      lbls,
			Annotations: map[string]string{AnnotationPodNS: pod.Namespace, AnnotationPodNam: pod.Name},
		},
		Spec: v1.PodSpec{
			Containers:                    p.Containers,
			InitContainers:                p.InitContainers,
			Volumes:                       p.Volumes,
			RestartPolicy:                 pod.Spec.RestartPolicy,
			TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
			ActiveDeadlineSeconds:         pod.Spec.ActiveDeadlineSeconds,
			SecurityContext:               pod.Spec.SecurityContext,
			ImagePullSecrets:              pod.Spec.ImagePullSecrets,
			Hostname:                      pod.Spec.Hostname,
			Subdomain:                     pod.Spec.Subdomain,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
		},
	}, nil
}
