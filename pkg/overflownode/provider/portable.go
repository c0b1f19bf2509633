// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package provider

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// PortablePod is what of a home pod can run at a provider.
type PortablePod struct {
	Containers     []v1.Container
	InitContainers []v1.Container
	Volumes        []v1.Volume
}

// Portable returns the parts of pod a provider can run elsewhere: its
// containers with downward-API environment variables resolved to the home
// pod's identity, the service account token volume (and its mounts)
// dropped, and the volumes keepVolume accepts (nil accepts none). What
// would silently differ remotely (ConfigMap and Secret references, other
// volumes) fails with ErrUnsupported naming the field.
func Portable(pod *v1.Pod, keepVolume func(v1.Volume) bool) (*PortablePod, error) {
	out := &PortablePod{}
	dropped := map[string]bool{}
	for i, vol := range pod.Spec.Volumes {
		switch {
		case isServiceAccountToken(vol):
			dropped[vol.Name] = true
		case keepVolume != nil && keepVolume(vol):
			out.Volumes = append(out.Volumes, vol)
		default:
			return nil, fmt.Errorf("%w: spec.volumes[%d] (%s): this provider cannot carry this volume type", ErrUnsupported, i, vol.Name)
		}
	}
	var err error
	if out.Containers, err = portableContainers(pod, "spec.containers", pod.Spec.Containers, dropped); err != nil {
		return nil, err
	}
	if out.InitContainers, err = portableContainers(pod, "spec.initContainers", pod.Spec.InitContainers, dropped); err != nil {
		return nil, err
	}
	return out, nil
}

func isServiceAccountToken(vol v1.Volume) bool {
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

func portableContainers(pod *v1.Pod, path string, in []v1.Container, dropMounts map[string]bool) ([]v1.Container, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]v1.Container, 0, len(in))
	for i := range in {
		c := in[i].DeepCopy()
		where := fmt.Sprintf("%s[%d] (%s)", path, i, c.Name)
		if len(c.EnvFrom) > 0 {
			return nil, fmt.Errorf("%w: %s: envFrom refers to home ConfigMaps or Secrets", ErrUnsupported, where)
		}
		for j := range c.Env {
			env := &c.Env[j]
			if env.ValueFrom == nil {
				continue
			}
			switch {
			case env.ValueFrom.FieldRef != nil:
				v, ok := fieldValue(pod, env.ValueFrom.FieldRef.FieldPath)
				if !ok {
					return nil, fmt.Errorf("%w: %s: env %s refers to field %s", ErrUnsupported, where, env.Name, env.ValueFrom.FieldRef.FieldPath)
				}
				env.Value, env.ValueFrom = v, nil
			case env.ValueFrom.ResourceFieldRef != nil:
				// The same resources are requested remotely.
			default:
				return nil, fmt.Errorf("%w: %s: env %s refers to a home ConfigMap or Secret", ErrUnsupported, where, env.Name)
			}
		}
		var mounts []v1.VolumeMount
		for _, m := range c.VolumeMounts {
			if !dropMounts[m.Name] {
				mounts = append(mounts, m)
			}
		}
		c.VolumeMounts = mounts
		out = append(out, *c)
	}
	return out, nil
}

// fieldValue resolves the downward-API fields that mean the same remotely:
// the home pod's identity.
func fieldValue(pod *v1.Pod, path string) (string, bool) {
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
