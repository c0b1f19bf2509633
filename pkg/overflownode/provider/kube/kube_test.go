// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

func homePod() *v1.Pod {
	gpu := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "llm-7f9", UID: "0b7e", Labels: map[string]string{"app": "llm"}},
		Spec: v1.PodSpec{
			NodeName: "sluice-overflow", PriorityClassName: "production", SchedulerName: "sluice-production",
			Tolerations: []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}},
			Volumes: []v1.Volume{
				{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			},
			Containers: []v1.Container{{
				Name: "server", Image: "vllm:v0.11",
				Env: []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}}},
				VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				Resources:    v1.ResourceRequirements{Requests: gpu, Limits: gpu},
			}},
		},
	}
}

func TestRemotePod(t *testing.T) {
	remote, err := RemotePod("sluice-0b7e", "sluice-overflow", "burst", homePod(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if remote.Name != "sluice-0b7e" || remote.Namespace != "burst" {
		t.Errorf("remote pod %s/%s, want burst/sluice-0b7e", remote.Namespace, remote.Name)
	}
	wantLabels := map[string]string{"app": "llm", LabelManagedBy: ManagedBy, LabelNode: "sluice-overflow", LabelPodUID: "0b7e"}
	if diff := cmp.Diff(wantLabels, remote.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	spec := remote.Spec
	if spec.NodeName != "" || spec.PriorityClassName != "" || spec.SchedulerName != "" || len(spec.Tolerations) != 0 {
		t.Errorf("home-only fields carried over: %+v", spec)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "cache" {
		t.Errorf("volumes = %+v, want only the emptyDir", spec.Volumes)
	}
	c := spec.Containers[0]
	wantEnv := []v1.EnvVar{{Name: "POD", Value: "llm-7f9"}, {Name: "APP", Value: "llm"}}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("env (-want,+got):\n%s", diff)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "cache" {
		t.Errorf("mounts = %+v, want only /cache", c.VolumeMounts)
	}
	w := workloadOf(remote)
	if w.Pod != (provider.PodRef{Namespace: "serve", Name: "llm-7f9", UID: "0b7e"}) || w.Node != "sluice-overflow" {
		t.Errorf("workload read back = %+v", w)
	}

	withSecret := homePod()
	withSecret.Spec.Volumes = append(withSecret.Spec.Volumes, v1.Volume{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}})
	if _, err := RemotePod("sluice-0b7e", "n", "burst", withSecret, Options{ConfigMaps: true}); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "spec.volumes[2] (creds)") {
		t.Errorf("secret volume, Secrets not carried: %v, want ErrUnsupported naming spec.volumes[2] (creds)", err)
	}
}

// readsHome makes a pod read Secret hf (env and envFrom) and ConfigMap
// model (volume).
func readsHome(p *v1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "model", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "model"}}}})
	c := &p.Spec.Containers[0]
	c.Env = append(c.Env, v1.EnvVar{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}})
	c.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}}}}
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "model", MountPath: "/etc/model"})
}

// TestSecretsAndConfigMapsAreCopied: the remote pod reads copies of the
// home objects, owned by it and kept up to date; Delete removes them; the
// home pod is not changed.
func TestSecretsAndConfigMapsAreCopied(t *testing.T) {
	client := fake.NewClientset()
	p := New(client, "burst", "sluice-overflow", Options{Secrets: true, ConfigMaps: true})
	ctx := context.Background()
	home := homePod()
	readsHome(home)
	before := home.DeepCopy()
	refs := provider.Refs{
		Secrets:    map[string]*v1.Secret{"hf": {ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "hf"}, Type: v1.SecretTypeOpaque, Data: map[string][]byte{"token": []byte("one")}}},
		ConfigMaps: map[string]*v1.ConfigMap{"model": {ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "model"}, Data: map[string]string{"config.json": "{}"}}},
	}
	if err := p.Create(ctx, "sluice-0b7e", home, refs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, home); diff != "" {
		t.Errorf("Create changed the home pod (-before,+after):\n%s", diff)
	}
	remote, err := client.CoreV1().Pods("burst").Get(ctx, "sluice-0b7e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := remote.Spec.Containers[0]
	if got := c.Env[len(c.Env)-1].ValueFrom.SecretKeyRef.Name; got != "sluice-0b7e-s-hf" {
		t.Errorf("env HF_TOKEN reads Secret %s, want the copy sluice-0b7e-s-hf", got)
	}
	if got := c.EnvFrom[0].SecretRef.Name; got != "sluice-0b7e-s-hf" {
		t.Errorf("envFrom reads Secret %s, want the copy", got)
	}
	if got := remote.Spec.Volumes[len(remote.Spec.Volumes)-1].ConfigMap.Name; got != "sluice-0b7e-c-model" {
		t.Errorf("volume model reads ConfigMap %s, want the copy sluice-0b7e-c-model", got)
	}
	secret, err := client.CoreV1().Secrets("burst").Get(ctx, "sluice-0b7e-s-hf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["token"]) != "one" || len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].Name != "sluice-0b7e" ||
		secret.OwnerReferences[0].Kind != "Pod" || secret.Labels[LabelPodUID] != "0b7e" {
		t.Errorf("Secret copy %+v, want the data, owned by the remote pod, labelled with the home pod's UID", secret.ObjectMeta)
	}
	if _, err := client.CoreV1().ConfigMaps("burst").Get(ctx, "sluice-0b7e-c-model", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap copy: %v", err)
	}

	refs.Secrets["hf"].Data = map[string][]byte{"token": []byte("two")}
	if err := p.Create(ctx, "sluice-0b7e", home, refs); err != nil {
		t.Fatalf("Create of an existing workload with a changed Secret: %v", err)
	}
	if secret, _ := client.CoreV1().Secrets("burst").Get(ctx, "sluice-0b7e-s-hf", metav1.GetOptions{}); string(secret.Data["token"]) != "two" {
		t.Errorf("Secret copy after the change has %q, want two", secret.Data["token"])
	}

	if err := p.Delete(ctx, "sluice-0b7e"); err != nil {
		t.Fatal(err)
	}
	if s, _ := client.CoreV1().Secrets("burst").List(ctx, metav1.ListOptions{}); len(s.Items) != 0 {
		t.Errorf("Secret copies left after Delete: %d", len(s.Items))
	}
	if c, _ := client.CoreV1().ConfigMaps("burst").List(ctx, metav1.ListOptions{}); len(c.Items) != 0 {
		t.Errorf("ConfigMap copies left after Delete: %d", len(c.Items))
	}

	// Not carried: refused, nothing created.
	none := New(fake.NewClientset(), "burst", "sluice-overflow", Options{})
	if err := none.Create(ctx, "sluice-0b7e", home, refs); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "are not carried") {
		t.Errorf("Secrets and ConfigMaps not carried: %v, want ErrUnsupported saying so", err)
	}
	secretsOnly := New(fake.NewClientset(), "burst", "sluice-overflow", Options{ConfigMaps: true})
	if err := secretsOnly.Create(ctx, "sluice-0b7e", home, refs); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), "envFrom refers to Secret hf") {
		t.Errorf("Secrets not carried: %v, want ErrUnsupported naming the envFrom", err)
	}
	if got := SecretCopy("sluice-0b7e", strings.Repeat("x", 250)); len(got) > 253 || !strings.HasPrefix(got, "sluice-0b7e-s-") {
		t.Errorf("copy of a long name: %q (%d), want a hashed name within 253", got, len(got))
	}
}

func TestListAndCapacity(t *testing.T) {
	ready := []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	alloc := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	client := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: v1.NodeStatus{Allocatable: alloc, Conditions: ready}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: v1.NodeStatus{Allocatable: alloc, Conditions: ready}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Allocatable: alloc, Conditions: ready}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "notready"}, Status: v1.NodeStatus{Allocatable: alloc}},
	)
	p := New(client, "burst", "sluice-overflow", Options{})
	other := New(client, "burst", "another-overflow", Options{})
	ctx := context.Background()
	if err := p.Create(ctx, "sluice-0b7e", homePod(), provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Create(ctx, "sluice-0b7e", homePod(), provider.Refs{}); err != nil {
		t.Errorf("repeated create: %v", err)
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "sluice-0b7e" || list[0].Phase != provider.Pending {
		t.Errorf("List = %+v, %v", list, err)
	}
	if list, _ := other.List(ctx); len(list) != 0 {
		t.Errorf("another node lists our workload: %+v", list)
	}
	if _, err := other.Get(ctx, "sluice-0b7e"); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("another node gets our workload: %v", err)
	}
	capacity, err := p.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := capacity["nvidia.com/gpu"]; got.Value() != 16 {
		t.Errorf("capacity = %s GPUs, want 16 (Ready, schedulable nodes only)", got.String())
	}
	if err := p.Delete(ctx, "sluice-0b7e"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, "sluice-0b7e"); err != nil {
		t.Errorf("repeated delete: %v", err)
	}
}

// TestAdopt: a warm instance adopted by another home pod is listed as
// that pod's (labels and annotations re-pointed); adopting what is not
// there, or another node's, is ErrNotFound.
func TestAdopt(t *testing.T) {
	client := fake.NewClientset()
	p := New(client, "burst", "sluice-overflow", Options{})
	other := New(client, "burst", "another-overflow", Options{})
	ctx := context.Background()
	home := homePod()
	id := provider.WarmIDFor(home.UID)
	if err := p.Create(ctx, id, home, provider.Refs{}); err != nil {
		t.Fatal(err)
	}
	adopter := provider.PodRef{Namespace: home.Namespace, Name: "llm-new", UID: "uid-new"}
	if err := p.Adopt(ctx, id, adopter); err != nil {
		t.Fatal(err)
	}
	w, err := p.Get(ctx, id)
	if err != nil || w.Pod != adopter || w.Unadopted() || w.Validate() != nil {
		t.Errorf("after Adopt: %+v, %v; want pod %v, adopted, valid", w, err, adopter)
	}
	for _, tt := range []struct {
		name string
		p    *Provider
		id   string
	}{{"missing", p, provider.WarmIDFor("nope")}, {"another node's", other, id}} {
		if err := tt.p.Adopt(ctx, tt.id, adopter); !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("Adopt %s = %v, want ErrNotFound", tt.name, err)
		}
	}
}

// TestCopyFailureLeavesNoPod: when the copies cannot be made (the remote
// Role lacks the verbs), the remote pod just created is removed, so it is
// not listed, adopted and run without what it reads; UpdateRefs never
// creates a pod that is gone.
func TestCopyFailureLeavesNoPod(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no create on secrets"))
	})
	p := New(client, "burst", "sluice-overflow", Options{Secrets: true, ConfigMaps: true})
	ctx := context.Background()
	home := homePod()
	readsHome(home)
	refs := provider.Refs{
		Secrets:    map[string]*v1.Secret{"hf": {Data: map[string][]byte{"token": []byte("one")}}},
		ConfigMaps: map[string]*v1.ConfigMap{"model": {Data: map[string]string{"config.json": "{}"}}},
	}
	if err := p.Create(ctx, "sluice-0b7e", home, refs); err == nil || !strings.Contains(err.Error(), "copying Secret serve/hf") {
		t.Fatalf("Create with copies refused: %v, want the copy named", err)
	}
	if pods, _ := client.CoreV1().Pods("burst").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("a remote pod was left without its copies: %d", len(pods.Items))
	}
	if err := p.UpdateRefs(ctx, "sluice-0b7e", home, refs); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("UpdateRefs of a remote pod that is gone: %v, want ErrNotFound", err)
	}
	if pods, _ := client.CoreV1().Pods("burst").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("UpdateRefs created a remote pod")
	}
}

// TestTerminatingRemotePodIsNotTaken: a remote pod of the id that is
// being removed is not taken as the workload; Create says to try again.
func TestTerminatingRemotePodIsNotTaken(t *testing.T) {
	now := metav1.Now()
	dying := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "burst", Name: "sluice-0b7e", DeletionTimestamp: &now, Finalizers: []string{"x"},
		Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNode: "sluice-overflow", LabelPodUID: "0b7e"}}}
	p := New(fake.NewClientset(dying), "burst", "sluice-overflow", Options{Secrets: true, ConfigMaps: true})
	if err := p.Create(context.Background(), "sluice-0b7e", homePod(), provider.Refs{}); err == nil || !strings.Contains(err.Error(), "terminating") {
		t.Errorf("Create over a terminating remote pod: %v, want an error saying it is terminating", err)
	}
}

// TestImagePullSecretsAreCopiedPerPod: a pod's image pull secrets are
// copied like the Secrets it reads, under the remote pod's names, and the
// remote pod pulls with its copies: two tenants' "regcred" never meet in
// the shared remote namespace, and no pod pulls with another's.
func TestImagePullSecretsAreCopiedPerPod(t *testing.T) {
	client := fake.NewClientset()
	p := New(client, "burst", "sluice-overflow", Options{Secrets: true, ConfigMaps: true})
	ctx := context.Background()
	for _, tenant := range []string{"team-a", "team-b"} {
		home := homePod()
		home.Namespace, home.UID = tenant, types.UID("uid-"+tenant)
		home.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		refs := provider.Refs{Secrets: map[string]*v1.Secret{"regcred": {ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "regcred"},
			Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"` + tenant + `":{}}}`)}}}}
		id := "sluice-" + tenant
		if err := p.Create(ctx, id, home, refs); err != nil {
			t.Fatal(err)
		}
		remote, err := client.CoreV1().Pods("burst").Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []v1.LocalObjectReference{{Name: SecretCopy(id, "regcred")}}
		if diff := cmp.Diff(want, remote.Spec.ImagePullSecrets); diff != "" {
			t.Errorf("%s: the remote pod's image pull secrets (-want,+got):\n%s", tenant, diff)
		}
		copied, err := client.CoreV1().Secrets("burst").Get(ctx, SecretCopy(id, "regcred"), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the copy of its pull secret: %v", tenant, err)
		}
		if !strings.Contains(string(copied.Data[v1.DockerConfigJsonKey]), tenant) || copied.Type != v1.SecretTypeDockerConfigJson {
			t.Errorf("%s: the copy holds %s (%s), want its own credentials", tenant, copied.Data[v1.DockerConfigJsonKey], copied.Type)
		}
	}
	if _, err := client.CoreV1().Secrets("burst").Get(ctx, "regcred", metav1.GetOptions{}); err == nil {
		t.Errorf("a Secret named regcred, a home name, exists in the shared remote namespace")
	}
}

// TestUsage: the remote metrics.k8s.io measure of this node's remote pods
// only; a remote cluster without the API measures nothing.
func TestUsage(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	pm := func(name, node string) *metricsv1beta1.PodMetrics {
		return &metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: "burst", Name: name, Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNode: node}},
			Timestamp:  at, Window: metav1.Duration{Duration: 15 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "server", Usage: v1.ResourceList{v1.ResourceCPU: resource.MustParse("750m"), v1.ResourceMemory: resource.MustParse("3Gi")}}},
		}
	}
	// As metrics-server answers: by label selector.
	m := metricsfake.NewSimpleClientset()
	m.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sel := a.(clienttesting.ListAction).GetListRestrictions().Labels
		out := &metricsv1beta1.PodMetricsList{}
		for _, p := range []*metricsv1beta1.PodMetrics{pm("sluice-a", "ovf"), pm("sluice-b", "other-node")} {
			if sel.Matches(labels.Set(p.Labels)) {
				out.Items = append(out.Items, *p)
			}
		}
		return true, out, nil
	})
	p := New(fake.NewClientset(), "burst", "ovf", Options{}).WithMetrics(m)
	got, err := p.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "sluice-a" || !got[0].Time.Equal(at.Time) || len(got[0].Containers) != 1 ||
		got[0].Containers[0].CPU.MilliValue() != 750 || got[0].Containers[0].Memory.Value() != 3<<30 {
		t.Errorf("usage = %+v, want sluice-a only, 750m and 3Gi", got)
	}
	if _, err := New(fake.NewClientset(), "burst", "ovf", Options{}).Usage(context.Background()); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("usage without a metrics client: %v, want ErrUnsupported", err)
	}
	none := metricsfake.NewSimpleClientset()
	none.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "")
	})
	if _, err := New(fake.NewClientset(), "burst", "ovf", Options{}).WithMetrics(none).Usage(context.Background()); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("usage of a cluster without metrics.k8s.io: %v, want ErrUnsupported", err)
	}
}
