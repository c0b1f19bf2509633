// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package provider

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Kinds of object a pod refers to.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// Ref is one field of a pod that reads a home Secret or ConfigMap.
type Ref struct {
	Kind string // KindSecret or KindConfigMap
	Name string
	// Key is the one key an env var reads; empty for envFrom and volumes
	// (which read every key, or the items they list).
	Key string
	// Optional: the pod runs without it, as kubelet runs it.
	Optional bool
	// Volume is the volume's name when the ref is a volume.
	Volume string
	// Where names the field, as spec.containers[0] (vllm) env HF_TOKEN.
	Where string
}

// RefsOf lists every field of pod that reads a Secret or ConfigMap, in
// spec order (volumes, image pull secrets, then init containers, then
// containers).
func RefsOf(pod *v1.Pod) []Ref {
	var out []Ref
	for i, vol := range pod.Spec.Volumes {
		where := fmt.Sprintf("spec.volumes[%d] (%s)", i, vol.Name)
		switch {
		case vol.Secret != nil:
			out = append(out, Ref{Kind: KindSecret, Name: vol.Secret.SecretName, Optional: optional(vol.Secret.Optional), Volume: vol.Name, Where: where})
		case vol.ConfigMap != nil:
			out = append(out, Ref{Kind: KindConfigMap, Name: vol.ConfigMap.Name, Optional: optional(vol.ConfigMap.Optional), Volume: vol.Name, Where: where})
		}
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		// Optional, as kubelet pulls without a pull secret that is missing.
		out = append(out, Ref{Kind: KindSecret, Name: ref.Name, Optional: true, Where: fmt.Sprintf("spec.imagePullSecrets[%d]", i)})
	}
	for _, set := range []struct {
		path string
		in   []v1.Container
	}{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}} {
		for i := range set.in {
			c := &set.in[i]
			where := fmt.Sprintf("%s[%d] (%s)", set.path, i, c.Name)
			for _, from := range c.EnvFrom {
				switch {
				case from.SecretRef != nil:
					out = append(out, Ref{Kind: KindSecret, Name: from.SecretRef.Name, Optional: optional(from.SecretRef.Optional), Where: where + " envFrom"})
				case from.ConfigMapRef != nil:
					out = append(out, Ref{Kind: KindConfigMap, Name: from.ConfigMapRef.Name, Optional: optional(from.ConfigMapRef.Optional), Where: where + " envFrom"})
				}
			}
			for _, env := range c.Env {
				switch from := env.ValueFrom; {
				case from == nil:
				case from.SecretKeyRef != nil:
					out = append(out, Ref{Kind: KindSecret, Name: from.SecretKeyRef.Name, Key: from.SecretKeyRef.Key, Optional: optional(from.SecretKeyRef.Optional), Where: where + " env " + env.Name})
				case from.ConfigMapKeyRef != nil:
					out = append(out, Ref{Kind: KindConfigMap, Name: from.ConfigMapKeyRef.Name, Key: from.ConfigMapKeyRef.Key, Optional: optional(from.ConfigMapKeyRef.Optional), Where: where + " env " + env.Name})
				}
			}
		}
	}
	return out
}

func optional(b *bool) bool { return b != nil && *b }

// Has reports whether refs holds the object r names.
func (r Refs) Has(ref Ref) bool {
	if ref.Kind == KindSecret {
		return r.Secrets[ref.Name] != nil
	}
	return r.ConfigMaps[ref.Name] != nil
}

// RenameRefs points every Secret and ConfigMap reference of p at the
// names its provider keeps the copies under. p's volumes and containers
// must be p's own (Portable copies them).
func RenameRefs(p *PortablePod, secret, configMap func(string) string) {
	for i := range p.ImagePullSecrets {
		p.ImagePullSecrets[i].Name = secret(p.ImagePullSecrets[i].Name)
	}
	for i := range p.Volumes {
		vol := &p.Volumes[i]
		switch {
		case vol.Secret != nil:
			vol.Secret.SecretName = secret(vol.Secret.SecretName)
		case vol.ConfigMap != nil:
			vol.ConfigMap.Name = configMap(vol.ConfigMap.Name)
		}
	}
	for _, cs := range [][]v1.Container{p.InitContainers, p.Containers} {
		for i := range cs {
			c := &cs[i]
			for j := range c.EnvFrom {
				from := &c.EnvFrom[j]
				switch {
				case from.SecretRef != nil:
					from.SecretRef.Name = secret(from.SecretRef.Name)
				case from.ConfigMapRef != nil:
					from.ConfigMapRef.Name = configMap(from.ConfigMapRef.Name)
				}
			}
			for j := range c.Env {
				switch from := c.Env[j].ValueFrom; {
				case from == nil:
				case from.SecretKeyRef != nil:
					from.SecretKeyRef.Name = secret(from.SecretKeyRef.Name)
				case from.ConfigMapKeyRef != nil:
					from.ConfigMapKeyRef.Name = configMap(from.ConfigMapKeyRef.Name)
				}
			}
		}
	}
}
