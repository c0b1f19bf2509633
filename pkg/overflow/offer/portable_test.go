// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package offer

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func podWith(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "vllm", Image: "vllm",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}}}
	p.Name, p.Namespace = "llm-0", "serve"
	if mutate != nil {
		mutate(p)
	}
	return p
}

func secretEnv(p *v1.Pod) {
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}})
}

func resourceEnv(p *v1.Pod) {
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: "LIMIT", ValueFrom: &v1.EnvVarSource{
		ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory"}}})
}

// TestPortable is the table of what a provider can carry, with the field
// each refusal names.
func TestPortable(t *testing.T) {
	scratch := Carries{Volumes: []string{"emptyDir"}}
	tests := []struct {
		name    string
		pod     *v1.Pod
		carries Carries
		want    string // "" is portable; else a part of the error
	}{
		{"plain", podWith(nil), Carries{}, ""},
		{"service account token is dropped", podWith(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
		}), Carries{}, ""},
		{"identity from the downward API", podWith(func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}}}
		}), Carries{}, ""},
		{"host IP has no remote equivalent", podWith(func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "HOST", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}}
		}), Carries{}, "spec.containers[0] (vllm): env HOST refers to field status.hostIP"},
		{"env from the container's resources where not carried", podWith(resourceEnv), Carries{}, "env LIMIT refers to the container's resources"},
		{"env from the container's resources where carried", podWith(resourceEnv), Carries{ResourceEnv: true}, ""},
		{"secret env", podWith(secretEnv), scratch, "spec.containers[0] (vllm): env HF_TOKEN refers to Secret hf, and Secrets are not carried"},
		{"secret env where Secrets are carried", podWith(secretEnv), Carries{Secrets: true}, ""},
		{"image pull secret where Secrets are not carried", podWith(func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		}), scratch, "spec.imagePullSecrets[0]: refers to Secret regcred, and Secrets are not carried"},
		{"image pull secret where Secrets are carried", podWith(func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		}), Carries{Secrets: true}, ""},
		{"configMap envFrom in an init container", podWith(func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "fetch", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}}
		}), Carries{Secrets: true}, "spec.initContainers[0] (fetch): envFrom refers to ConfigMap cfg"},
		{"emptyDir where carried", podWith(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		}), scratch, ""},
		{"emptyDir where no volume is carried", podWith(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		}), Carries{}, "spec.volumes[0] (cache): emptyDir volumes are not carried"},
		{"model weights on a PVC", podWith(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "weights", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "w"}}}}
		}), scratch, "spec.volumes[1] (weights): persistentVolumeClaim volumes are not carried"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Portable(tt.pod, tt.carries)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Portable = %v, want portable", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrNotPortable)):
				t.Errorf("Portable = %v, want an ErrNotPortable naming %q", err, tt.want)
			}
		})
	}
}

// TestOfferCanRun: an offer runs a pod when one provider, healthy or not,
// carries it and is big enough for it; a provider that does not say what
// it carries runs what it accepts.
func TestOfferCanRun(t *testing.T) {
	gpus := func(n string) v1.ResourceList { return v1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)} }
	o := Offer{Providers: []Provider{
		{Name: "small", Healthy: true, Capacity: gpus("1"), Carries: &Carries{Secrets: true}},
		{Name: "plain", Healthy: false, Capacity: gpus("8"), Carries: &Carries{}},
		{Name: "cpu", Healthy: true, Carries: &Carries{Secrets: true}},
	}}
	if err := o.CanRun(podWith(nil)); err != nil {
		t.Errorf("plain 2-GPU pod: %v (an unhealthy provider still counts)", err)
	}
	err := o.CanRun(podWith(secretEnv))
	for _, want := range []string{"provider small: the pod requests 2 nvidia.com/gpu, more than the provider's 1 in all",
		"provider plain: spec.containers[0] (vllm): env HF_TOKEN refers to Secret hf",
		"provider cpu: the pod requests 2 nvidia.com/gpu, which the provider does not have"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("secret 2-GPU pod: %v, want it to say %q", err, want)
		}
	}
	foreign := Offer{Providers: []Provider{{Healthy: true, Capacity: gpus("8")}}}
	if err := foreign.CanRun(podWith(secretEnv)); err != nil {
		t.Errorf("a node that does not say what it carries: %v", err)
	}
}

// TestProviderNamespaces: a provider that names its namespaces runs pods
// of those only, and says so of the others.
func TestProviderNamespaces(t *testing.T) {
	gpus := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	p := Provider{Name: "east", Namespaces: []string{"serving"}, Capacity: gpus}
	pod := podWith(nil)
	pod.Namespace = "serving"
	if err := p.CanRun(pod); err != nil {
		t.Errorf("a pod of its namespace: %v", err)
	}
	pod.Namespace = "team-b"
	if err := p.CanRun(pod); err == nil || !strings.Contains(err.Error(), "namespace team-b is not among its namespaces") {
		t.Errorf("a pod of another namespace: %v, want refused, naming it", err)
	}
	if err := (Provider{Name: "any", Capacity: gpus}).CanRun(pod); err != nil {
		t.Errorf("a provider that names no namespaces: %v", err)
	}
}
