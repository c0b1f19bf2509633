// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package provider

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// PortablePod is what of a home pod can run at a provider.
type PortablePod struct {
	Containers     []v1.Container
	InitContainers []v1.Container
	Volumes        []v1.Volume
	// ImagePullSecrets are copied like the other Secrets the pod reads.
	ImagePullSecrets []v1.LocalObjectReference
}

// Portable returns the parts of pod a provider that carries what carries
// says can run elsewhere: its containers with downward-API environment
// variables resolved to the home pod's identity, the service account token
// volume (and its mounts) dropped, and its other volumes. Whether it can
// is decided by offer.Portable, the function the scheduler decides with
// too; what cannot go fails with ErrUnsupported naming the field.
func Portable(pod *v1.Pod, carries offer.Carries) (*PortablePod, error) {
	if err := offer.Portable(pod, carries); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, offer.Why(err))
	}
	out := &PortablePod{}
	dropped := map[string]bool{}
	for _, vol := range pod.Spec.Volumes {
		if offer.ServiceAccountToken(vol) {
			dropped[vol.Name] = true
			continue
		}
		out.Volumes = append(out.Volumes, *vol.DeepCopy())
	}
	out.ImagePullSecrets = append([]v1.LocalObjectReference(nil), pod.Spec.ImagePullSecrets...)
	out.Containers = portableContainers(pod, pod.Spec.Containers, dropped)
	out.InitContainers = portableContainers(pod, pod.Spec.InitContainers, dropped)
	return out, nil
}

func portableContainers(pod *v1.Pod, in []v1.Container, dropMounts map[string]bool) []v1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1.Container, 0, len(in))
	for i := range in {
		c := in[i].DeepCopy()
		for j := range c.Env {
			env := &c.Env[j]
			if env.ValueFrom != nil && env.ValueFrom.FieldRef != nil {
				env.Value, _ = offer.FieldValue(pod, env.ValueFrom.FieldRef.FieldPath)
				env.ValueFrom = nil
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
	return out
}
