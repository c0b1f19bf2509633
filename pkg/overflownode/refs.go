// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Reasons for a pod held back by a Secret or ConfigMap it reads, as
// kubelet gives them.
const (
	// ReasonConfigError: an env var's Secret, ConfigMap or key is missing.
	ReasonConfigError = "CreateContainerConfigError"
	// ReasonFailedMount: a volume's Secret or ConfigMap is missing.
	ReasonFailedMount = "FailedMount"
)

// refReader reads the home Secrets and ConfigMaps pods refer to, each at
// most once per reader (one reconcile pass, or one dispatch): the node
// reads no object a pod bound to it does not name, and lists nothing.
type refReader struct {
	client  kubernetes.Interface
	secrets map[string]readSecret
	configs map[string]readConfigMap
}

type readSecret struct {
	obj *v1.Secret
	err error
}

type readConfigMap struct {
	obj *v1.ConfigMap
	err error
}

func newRefReader(client kubernetes.Interface) *refReader {
	return &refReader{client: client, secrets: map[string]readSecret{}, configs: map[string]readConfigMap{}}
}

// missingRef is a Secret, ConfigMap or key a pod needs that does not
// exist: the pod waits, as kubelet holds such a pod back.
type missingRef struct {
	ref provider.Ref
	msg string
}

func (m *missingRef) Error() string { return m.msg }

// reason is the kubelet reason for it.
func (m *missingRef) reason() string {
	if m.ref.Volume != "" {
		return ReasonFailedMount
	}
	return ReasonConfigError
}

// read returns what pod reads, and a fingerprint of it (the objects and
// their resourceVersions) that changes whenever one of them does. A
// missing object or key that is not optional is a *missingRef; other
// errors (the apiserver, RBAC) are returned as they are.
func (r *refReader) read(ctx context.Context, pod *v1.Pod) (provider.Refs, string, error) {
	var refs provider.Refs
	var seen []string
	for _, ref := range provider.RefsOf(pod) {
		var data map[string]bool
		var rv string
		switch ref.Kind {
		case provider.KindSecret:
			s, err := r.secret(ctx, pod.Namespace, ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ref.Optional {
					continue
				}
				return refs, "", r.wrap(pod, ref, err)
			}
			if refs.Secrets == nil {
				refs.Secrets = map[string]*v1.Secret{}
			}
			refs.Secrets[ref.Name] = s
			data, rv = keys(s.Data, nil), s.ResourceVersion
		default:
			c, err := r.configMap(ctx, pod.Namespace, ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && ref.Optional {
					continue
				}
				return refs, "", r.wrap(pod, ref, err)
			}
			if refs.ConfigMaps == nil {
				refs.ConfigMaps = map[string]*v1.ConfigMap{}
			}
			refs.ConfigMaps[ref.Name] = c
			data, rv = keys(nil, c.Data), c.ResourceVersion
			for k := range c.BinaryData {
				data[k] = true
			}
		}
		if ref.Key != "" && !data[ref.Key] && !ref.Optional {
			return refs, "", &missingRef{ref: ref, msg: fmt.Sprintf("%s: couldn't find key %s in %s %s/%s", ref.Where, ref.Key, ref.Kind, pod.Namespace, ref.Name)}
		}
		seen = append(seen, ref.Kind+"/"+ref.Name+"@"+rv)
	}
	sort.Strings(seen)
	return refs, strings.Join(seen, ","), nil
}

func (r *refReader) wrap(pod *v1.Pod, ref provider.Ref, err error) error {
	kind := strings.ToLower(ref.Kind)
	if apierrors.IsNotFound(err) {
		if ref.Volume != "" {
			return &missingRef{ref: ref, msg: fmt.Sprintf("MountVolume.SetUp failed for volume %q: %s %q not found", ref.Volume, kind, ref.Name)}
		}
		return &missingRef{ref: ref, msg: fmt.Sprintf("%s: %s %q not found", ref.Where, kind, ref.Name)}
	}
	return fmt.Errorf("reading %s %s/%s for %s: %w", ref.Kind, pod.Namespace, ref.Name, ref.Where, err)
}

func keys(a map[string][]byte, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func (r *refReader) secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	key := ns + "/" + name
	if got, ok := r.secrets[key]; ok {
		return got.obj, got.err
	}
	s, err := r.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	r.secrets[key] = readSecret{s, err}
	return s, err
}

func (r *refReader) configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	key := ns + "/" + name
	if got, ok := r.configs[key]; ok {
		return got.obj, got.err
	}
	c, err := r.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	r.configs[key] = readConfigMap{c, err}
	return c, err
}

// heldBack is the status of a pod waiting for a Secret, ConfigMap or key
// it reads: Pending, its containers waiting with kubelet's reason.
func (n *Node) heldBack(pod *v1.Pod, m *missingRef) v1.PodStatus {
	st := *pod.Status.DeepCopy()
	now := metav1.NewTime(n.now())
	st.Phase, st.Reason, st.Message = v1.PodPending, "", ""
	reason := m.reason()
	waiting := ReasonConfigError
	if reason == ReasonFailedMount {
		waiting = "ContainerCreating"
	}
	setCondition(&st, now, v1.ContainersReady, false, "ContainersNotReady", m.msg)
	setCondition(&st, now, v1.PodReady, false, "ContainersNotReady", m.msg)
	st.ContainerStatuses = make([]v1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, v1.ContainerStatus{Name: c.Name, Image: c.Image, Started: boolPtr(false),
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waiting, Message: m.msg}}})
	}
	return st
}
