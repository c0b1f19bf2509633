// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package offer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// ErrNotPortable is wrapped by every error saying a provider cannot run a
// pod as written.
var ErrNotPortable = errors.New("not supported by the provider")

// Carries is what a provider can run of a pod beyond its containers,
// their literal environment, ports and resources (which every provider
// runs), the downward-API fields that mean the same remotely (the home
// pod's identity) and the service account token (which is dropped: the
// remote side has no home apiserver to talk to).
type Carries struct {
	// Volumes are the volume types carried, by their field name in a pod
	// spec (emptyDir, secret, configMap, persistentVolumeClaim, ...).
	Volumes []string `json:"volumes,omitempty"`
	// Secrets: environment from home Secrets (env valueFrom.secretKeyRef,
	// envFrom.secretRef) is carried.
	Secrets bool `json:"secrets,omitempty"`
	// ConfigMaps: environment from home ConfigMaps is carried.
	ConfigMaps bool `json:"configMaps,omitempty"`
	// ResourceEnv: environment from the container's own resources
	// (valueFrom.resourceFieldRef) is carried (it resolves the same
	// remotely when the remote side is Kubernetes).
	ResourceEnv bool `json:"resourceEnv,omitempty"`
}

func (c Carries) volume(typ string) bool {
	for _, v := range c.Volumes {
		if v == typ {
			return true
		}
	}
	return false
}

// CanRun is nil when the provider can run pod: it carries every part of
// the pod (a provider that does not say what it carries, behind an
// overflow node that is not sluice's, is taken to run what it accepts) and its capacity holds the pod's requests of every resource it
// limits (a pod larger than the whole provider never fits, however empty).
// Health and room now are not looked at. Otherwise the error wraps
// ErrNotPortable and names the provider and the first field in the way.
func (p Provider) CanRun(pod *v1.Pod) error {
	if err := p.Admits(pod.Namespace); err != nil {
		return err
	}
	if p.Carries != nil {
		if err := Portable(pod, *p.Carries); err != nil {
			return fmt.Errorf("%w: provider %s: %s", ErrNotPortable, p.Name, Why(err))
		}
	}
	for name, want := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		has, limited := p.Capacity[name]
		if !limited {
			if isExtended(name) && !want.IsZero() {
				return fmt.Errorf("%w: provider %s: the pod requests %s %s, which the provider does not have", ErrNotPortable, p.Name, want.String(), name)
			}
			continue
		}
		if want.Cmp(has) > 0 {
			return fmt.Errorf("%w: provider %s: the pod requests %s %s, more than the provider's %s in all", ErrNotPortable, p.Name, want.String(), name, has.String())
		}
	}
	return nil
}

// Admits is nil when pods of namespace may run at the provider; otherwise
// the error wraps ErrNotPortable and says so.
func (p Provider) Admits(namespace string) error {
	if len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, namespace) {
		return nil
	}
	return fmt.Errorf("%w: provider %s: namespace %s is not among its namespaces", ErrNotPortable, p.Name, namespace)
}

// isExtended: an extended resource (GPUs) a provider that does not list
// it does not have; CPU, memory and storage it does not limit.
func isExtended(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods, v1.ResourceStorage:
		return false
	}
	return !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// CanRun is nil when one provider of the offer, healthy or not, can run
// pod; otherwise the error says why for each, in dispatch order.
func (o Offer) CanRun(pod *v1.Pod) error {
	if len(o.Providers) == 0 {
		return fmt.Errorf("%w: no providers", ErrNotPortable)
	}
	var whys []string
	for _, p := range o.Providers {
		err := p.CanRun(pod)
		if err == nil {
			return nil
		}
		whys = append(whys, Why(err))
	}
	return fmt.Errorf("%w: %s", ErrNotPortable, strings.Join(whys, "; "))
}

// Why is a portability error without the words of ErrNotPortable.
func Why(err error) string {
	return strings.TrimPrefix(err.Error(), ErrNotPortable.Error()+": ")
}

// Portable is nil when carries covers every part of pod a provider must
// carry; otherwise the error wraps ErrNotPortable and names the first
// field that cannot go, as spec.containers[0] (vllm): env HF_TOKEN refers
// to a Secret. This is the one function deciding portability: the
// overflow node dispatches with it, the scheduler's claim planner picks
// victims with it and the production profile's Filter keeps pods off
// overflow nodes with it.
func Portable(pod *v1.Pod, carries Carries) error {
	for i, vol := range pod.Spec.Volumes {
		if ServiceAccountToken(vol) {
			continue
		}
		if typ := VolumeType(vol); !carries.volume(typ) {
			return fmt.Errorf("%w: spec.volumes[%d] (%s): %s volumes are not carried", ErrNotPortable, i, vol.Name, typ)
		}
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		if !carries.Secrets {
			return fmt.Errorf("%w: spec.imagePullSecrets[%d]: refers to Secret %s, and Secrets are not carried", ErrNotPortable, i, ref.Name)
		}
	}
	for _, set := range []struct {
		path string
		in   []v1.Container
	}{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}} {
		for i := range set.in {
			if err := portableContainer(fmt.Sprintf("%s[%d] (%s)", set.path, i, set.in[i].Name), &set.in[i], carries); err != nil {
				return err
			}
		}
	}
	return nil
}

func portableContainer(where string, c *v1.Container, carries Carries) error {
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil && !carries.Secrets:
			return fmt.Errorf("%w: %s: envFrom refers to Secret %s, and Secrets are not carried", ErrNotPortable, where, from.SecretRef.Name)
		case from.ConfigMapRef != nil && !carries.ConfigMaps:
			return fmt.Errorf("%w: %s: envFrom refers to ConfigMap %s, and ConfigMaps are not carried", ErrNotPortable, where, from.ConfigMapRef.Name)
		}
	}
	for _, env := range c.Env {
		from := env.ValueFrom
		switch {
		case from == nil:
		case from.ResourceFieldRef != nil:
			if !carries.ResourceEnv {
				return fmt.Errorf("%w: %s: env %s refers to the container's resources (resourceFieldRef), which are not carried", ErrNotPortable, where, env.Name)
			}
		case from.FieldRef != nil:
			if _, ok := FieldValue(&v1.Pod{}, from.FieldRef.FieldPath); !ok {
				return fmt.Errorf("%w: %s: env %s refers to field %s, which has no remote equivalent", ErrNotPortable, where, env.Name, from.FieldRef.FieldPath)
			}
		case from.SecretKeyRef != nil && !carries.Secrets:
			return fmt.Errorf("%w: %s: env %s refers to Secret %s, and Secrets are not carried", ErrNotPortable, where, env.Name, from.SecretKeyRef.Name)
		case from.ConfigMapKeyRef != nil && !carries.ConfigMaps:
			return fmt.Errorf("%w: %s: env %s refers to ConfigMap %s, and ConfigMaps are not carried", ErrNotPortable, where, env.Name, from.ConfigMapKeyRef.Name)
		case from.SecretKeyRef == nil && from.ConfigMapKeyRef == nil:
			return fmt.Errorf("%w: %s: env %s has a source that is not carried", ErrNotPortable, where, env.Name)
		}
	}
	return nil
}

// ServiceAccountToken reports whether vol is a projected service account
// token (with, as admission adds it, the cluster's CA and namespace): the
// one volume every provider drops rather than carries.
func ServiceAccountToken(vol v1.Volume) bool {
	if vol.Projected == nil {
		return false
	}
	for _, s := range vol.Projected.Sources {
		if s.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

// VolumeType is a volume's type, by its field name in a pod spec.
func VolumeType(vol v1.Volume) string {
	s := vol.VolumeSource
	switch {
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.Secret != nil:
		return "secret"
	case s.ConfigMap != nil:
		return "configMap"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.HostPath != nil:
		return "hostPath"
	case s.Projected != nil:
		return "projected"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.CSI != nil:
		return "csi"
	case s.NFS != nil:
		return "nfs"
	case s.Image != nil:
		return "image"
	}
	return "other"
}

// FieldValue resolves the downward-API fields that mean the same
// remotely: the home pod's identity.
func FieldValue(pod *v1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels['": pod.Labels, "metadata.annotations['": pod.Annotations} {
		if strings.HasPrefix(path, prefix) && strings.HasSuffix(path, "']") {
			return m[strings.TrimSuffix(strings.TrimPrefix(path, prefix), "']")], true
		}
	}
	return "", false
}
