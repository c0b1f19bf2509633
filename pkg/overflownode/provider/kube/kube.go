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
//
// The home Secrets and ConfigMaps a pod reads are copied into the remote
// namespace as objects of their own, named after the remote pod
// (<id>-s-<name>, <id>-c-<name>), owned by it (so the remote cluster's
// garbage collector removes them with it) and labelled like it; the
// remote pod reads the copies. Create brings the copies up to date when
// the node hands it newer home objects.
package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
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
	client kubernetes.Interface
	// metrics reads the remote metrics.k8s.io (nil: Usage is
	// unsupported).
	metrics   metricsclient.Interface
	namespace string
	node      string
	opts      Options
}

// Options say what of the home cluster the provider copies to the remote
// one.
type Options struct {
	// Secrets: pods reading home Secrets run here, the Secrets copied.
	Secrets bool
	// ConfigMaps: pods reading home ConfigMaps run here, copied.
	ConfigMaps bool
}

// New returns a provider that creates pods in namespace through client,
// on behalf of the overflow node named node.
func New(client kubernetes.Interface, namespace, node string, opts Options) *Provider {
	return &Provider{client: client, namespace: namespace, node: node, opts: opts}
}

// FromKubeconfig builds a provider from a kubeconfig file.
func FromKubeconfig(path, namespace, node string, opts Options) (*Provider, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = "sluice-overflow-node"
	// client-go's default (5 QPS, burst 10) is below what one reconcile
	// (health, listing, capacity) and a wave of moves with their Secret
	// copies ask of the remote apiserver; its own priority and fairness
	// still guards it.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return New(client, namespace, node, opts).WithMetrics(metrics), nil
}

// WithMetrics makes Usage read the remote cluster's resource metrics
// API (metrics.k8s.io, served by its metrics-server) through m.
func (p *Provider) WithMetrics(m metricsclient.Interface) *Provider {
	p.metrics = m
	return p
}

var _ provider.UsageReader = &Provider{}

// Usage is the remote metrics.k8s.io measure of this node's remote pods
// (the remote identity needs list of podmetrics in the namespace). A
// remote cluster that serves no resource metrics API measures nothing.
func (p *Provider) Usage(ctx context.Context) ([]provider.Usage, error) {
	if p.metrics == nil {
		return nil, fmt.Errorf("%w: no metrics client", provider.ErrUnsupported)
	}
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelNode: p.node})
	list, err := p.metrics.MetricsV1beta1().PodMetricses(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: the remote cluster serves no metrics.k8s.io: %v", provider.ErrUnsupported, err)
	}
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("%w: the remote identity may not list podmetrics.metrics.k8s.io in %s: %v", provider.ErrUnsupported, p.namespace, err)
	}
	if err != nil {
		return nil, fmt.Errorf("listing pod metrics in %s: %w", p.namespace, err)
	}
	out := make([]provider.Usage, 0, len(list.Items))
	for _, m := range list.Items {
		u := provider.Usage{ID: m.Name, Time: m.Timestamp.Time}
		for _, c := range m.Containers {
			u.Containers = append(u.Containers, provider.ContainerUsage{Name: c.Name, CPU: c.Usage[v1.ResourceCPU], Memory: c.Usage[v1.ResourceMemory]})
		}
		out = append(out, u)
	}
	return out, nil
}

var _ provider.Provider = &Provider{}

// Create creates the remote pod, then the copies of the Secrets and
// ConfigMaps it reads, owned by it (until they exist the remote kubelet
// holds the pod back, as it does for any missing Secret); for a remote pod
// that exists it brings the copies up to date.
func (p *Provider) Create(ctx context.Context, id string, pod *v1.Pod, refs provider.Refs) error {
	remote, err := RemotePod(id, p.node, p.namespace, pod, p.opts)
	if err != nil {
		return err
	}
	created, err := p.client.CoreV1().Pods(p.namespace).Create(ctx, remote, metav1.CreateOptions{})
	fresh := err == nil
	if apierrors.IsAlreadyExists(err) {
		created, err = p.client.CoreV1().Pods(p.namespace).Get(ctx, id, metav1.GetOptions{})
	}
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		// The remote cluster refuses this pod as written (admission,
		// quota, policy): say so, do not hammer it.
		return fmt.Errorf("%w: remote cluster refused pod: %v", provider.ErrUnsupported, err)
	}
	if err != nil {
		return err
	}
	if created.DeletionTimestamp != nil {
		// One being removed (below, or by anyone) is not taken as this
		// pod's workload: try again once it is gone.
		return fmt.Errorf("remote pod %s is terminating", id)
	}
	if refs.Empty() {
		return nil
	}
	if err := p.copyRefs(ctx, created, pod, refs); err != nil {
		if fresh {
			// Not left behind to be listed, adopted and run without
			// what it reads: the next dispatch starts over. At once (it
			// has not started), this very pod only, and with a context
			// of its own (ctx may be what ran out).
			delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &created.UID}}
			if derr := p.client.CoreV1().Pods(p.namespace).Delete(delCtx, id, opts); derr != nil && !apierrors.IsNotFound(derr) {
				err = fmt.Errorf("%w (and removing the remote pod failed: %v)", err, derr)
			}
		}
		return err
	}
	return nil
}

// UpdateRefs brings the copies of an existing remote pod up to date; it
// never creates the pod (a vanished one is not run again).
func (p *Provider) UpdateRefs(ctx context.Context, id string, pod *v1.Pod, refs provider.Refs) error {
	remote, err := p.client.CoreV1().Pods(p.namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", id, provider.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if remote.Labels[LabelNode] != p.node || remote.Labels[LabelManagedBy] != ManagedBy {
		return fmt.Errorf("%s is not managed by overflow node %s: %w", id, p.node, provider.ErrNotFound)
	}
	return p.copyRefs(ctx, remote, pod, refs)
}

// copyRefs creates or updates the remote copies of refs, owned by the
// remote pod.
func (p *Provider) copyRefs(ctx context.Context, remote, home *v1.Pod, refs provider.Refs) error {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: p.namespace,
			Labels:          map[string]string{LabelManagedBy: ManagedBy, LabelNode: p.node, LabelPodUID: string(home.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: remote.Name, UID: remote.UID}},
		}
	}
	secrets := p.client.CoreV1().Secrets(p.namespace)
	for name, s := range refs.Secrets {
		if !p.opts.Secrets {
			return fmt.Errorf("%w: Secret %s: Secrets are not carried", provider.ErrUnsupported, name)
		}
		want := &v1.Secret{ObjectMeta: meta(SecretCopy(remote.Name, name)), Type: copyType(s.Type), Data: s.Data}
		_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var have *v1.Secret
			if have, err = secrets.Get(ctx, want.Name, metav1.GetOptions{}); err == nil &&
				(!equality.Semantic.DeepEqual(have.Data, want.Data) || !equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)) {
				// A copy left by an earlier remote pod of the same id
				// is taken over, so it is not collected with that one.
				have.Data, have.OwnerReferences = want.Data, want.OwnerReferences
				_, err = secrets.Update(ctx, have, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			// The error names the copy, never its data.
			return fmt.Errorf("copying Secret %s/%s to %s: %w", home.Namespace, name, SecretCopy(remote.Name, name), err)
		}
	}
	configMaps := p.client.CoreV1().ConfigMaps(p.namespace)
	for name, c := range refs.ConfigMaps {
		if !p.opts.ConfigMaps {
			return fmt.Errorf("%w: ConfigMap %s: ConfigMaps are not carried", provider.ErrUnsupported, name)
		}
		want := &v1.ConfigMap{ObjectMeta: meta(ConfigMapCopy(remote.Name, name)), Data: c.Data, BinaryData: c.BinaryData}
		_, err := configMaps.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var have *v1.ConfigMap
			if have, err = configMaps.Get(ctx, want.Name, metav1.GetOptions{}); err == nil &&
				(!equality.Semantic.DeepEqual(have.Data, want.Data) || !equality.Semantic.DeepEqual(have.BinaryData, want.BinaryData) ||
					!equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)) {
				have.Data, have.BinaryData, have.OwnerReferences = want.Data, want.BinaryData, want.OwnerReferences
				_, err = configMaps.Update(ctx, have, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("copying ConfigMap %s/%s to %s: %w", home.Namespace, name, ConfigMapCopy(remote.Name, name), err)
		}
	}
	return nil
}

// copyType keeps a Secret's type, except those the remote apiserver
// would check against things that exist only at home.
func copyType(t v1.SecretType) v1.SecretType {
	if t == v1.SecretTypeServiceAccountToken || t == "" {
		return v1.SecretTypeOpaque
	}
	return t
}

// SecretCopy and ConfigMapCopy name the remote copy of the home object
// name that remote pod id reads: <id>-s-<name>, or, when that is longer
// than an object name may be, <id>-s- and a hash of name.
func SecretCopy(id, name string) string { return copyName(id, "s", name) }

// ConfigMapCopy names a ConfigMap's copy (SecretCopy).
func ConfigMapCopy(id, name string) string { return copyName(id, "c", name) }

func copyName(id, kind, name string) string {
	out := id + "-" + kind + "-" + name
	if len(out) <= validation.DNS1123SubdomainMaxLength {
		return out
	}
	sum := sha256.Sum256([]byte(name))
	return id + "-" + kind + "-" + hex.EncodeToString(sum[:16])
}

// Carries is what the provider carries: scratch space, env from the
// container's own resources, and, as configured, the Secrets and
// ConfigMaps a pod reads (copied).
func (p *Provider) Carries() offer.Carries { return carries(p.opts) }

func carries(o Options) offer.Carries {
	c := offer.Carries{Volumes: []string{"emptyDir"}, ResourceEnv: true, Secrets: o.Secrets, ConfigMaps: o.ConfigMaps}
	if o.Secrets {
		c.Volumes = append(c.Volumes, "secret")
	}
	if o.ConfigMaps {
		c.Volumes = append(c.Volumes, "configMap")
	}
	return c
}

// Adopt re-points the remote pod at another home pod: its pod labels and
// annotations name the new one (the Secret and ConfigMap copies stay: the
// adopter, of the same template, reads the same).
func (p *Provider) Adopt(ctx context.Context, id string, ref provider.PodRef) error {
	victim, _ := provider.UIDOf(id)
	// A starting pod's status changes its resourceVersion: a conflict is
	// retried on a fresh read, never forced over another adopter.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		remote, err := p.client.CoreV1().Pods(p.namespace).Get(ctx, id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", id, provider.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if remote.Labels[LabelNode] != p.node || remote.Labels[LabelManagedBy] != ManagedBy || remote.DeletionTimestamp != nil {
			return fmt.Errorf("%s is not a live pod of overflow node %s: %w", id, p.node, provider.ErrNotFound)
		}
		switch remote.Labels[LabelPodUID] {
		case string(ref.UID):
			return nil
		case string(victim):
		default:
			return fmt.Errorf("%s runs pod %s already: %w", id, remote.Labels[LabelPodUID], provider.ErrNotFound)
		}
		if remote.Annotations == nil {
			remote.Annotations = map[string]string{}
		}
		remote.Labels[LabelPodUID] = string(ref.UID)
		remote.Annotations[AnnotationPodNS], remote.Annotations[AnnotationPodNam] = ref.Namespace, ref.Name
		_, err = p.client.CoreV1().Pods(p.namespace).Update(ctx, remote, metav1.UpdateOptions{})
		return err
	})
}

// Delete deletes the remote pod and the copies it reads (which the remote
// garbage collector would remove too, later).
func (p *Provider) Delete(ctx context.Context, id string) error {
	err := p.client.CoreV1().Pods(p.namespace).Delete(ctx, id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	uid, ok := provider.UIDOf(id)
	if !ok || (!p.opts.Secrets && !p.opts.ConfigMaps) {
		return nil
	}
	sel := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelNode: p.node, LabelPodUID: string(uid)}).String()}
	if p.opts.Secrets {
		list, err := p.client.CoreV1().Secrets(p.namespace).List(ctx, sel)
		if err != nil {
			return fmt.Errorf("listing the Secret copies of %s: %w", id, err)
		}
		for _, s := range list.Items {
			if err := p.client.CoreV1().Secrets(p.namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the Secret copy %s: %w", s.Name, err)
			}
		}
	}
	if p.opts.ConfigMaps {
		list, err := p.client.CoreV1().ConfigMaps(p.namespace).List(ctx, sel)
		if err != nil {
			return fmt.Errorf("listing the ConfigMap copies of %s: %w", id, err)
		}
		for _, c := range list.Items {
			if err := p.client.CoreV1().ConfigMaps(p.namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the ConfigMap copy %s: %w", c.Name, err)
			}
		}
	}
	return nil
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
	if !pod.CreationTimestamp.IsZero() {
		t := pod.CreationTimestamp.Time
		w.CreatedAt = &t
	}
	for _, ip := range pod.Status.PodIPs {
		w.Addresses = append(w.Addresses, ip.IP)
	}
	if !w.Ready {
		w.Message = messageOf(pod)
	}
	return w
}

// Logs streams the remote pod's log of container, through the remote
// apiserver (and so the remote kubelet).
func (p *Provider) Logs(ctx context.Context, id, container string, o provider.LogOptions) (io.ReadCloser, error) {
	opts := &v1.PodLogOptions{Container: container, Follow: o.Follow, Timestamps: o.Timestamps, Previous: o.Previous}
	if o.Tail > 0 {
		opts.TailLines = ptr.To(int64(o.Tail))
	}
	if o.LimitBytes > 0 {
		opts.LimitBytes = ptr.To(int64(o.LimitBytes))
	}
	if !o.Since.IsZero() {
		opts.SinceTime = &metav1.Time{Time: o.Since}
	}
	rc, err := p.client.CoreV1().Pods(p.namespace).GetLogs(id, opts).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: remote pod %s: %v", provider.ErrNotFound, id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("remote pod %s: %w", id, err)
	}
	return rc, nil
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
// out; the Secrets and ConfigMaps it reads are read from their copies;
// what cannot be carried over fails with provider.ErrUnsupported naming
// the field (provider.Portable).
func RemotePod(id, node, namespace string, pod *v1.Pod, opts Options) (*v1.Pod, error) {
	p, err := provider.Portable(pod, carries(opts))
	if err != nil {
		return nil, err
	}
	provider.RenameRefs(p,
		func(name string) string { return SecretCopy(id, name) },
		func(name string) string { return ConfigMapCopy(id, name) })
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
			ImagePullSecrets:              p.ImagePullSecrets,
			Hostname:                      pod.Spec.Hostname,
			Subdomain:                     pod.Spec.Subdomain,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
		},
	}, nil
}
