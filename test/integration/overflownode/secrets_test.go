// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/kube"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// readHome makes pods read Secret hf (env HF_TOKEN) and ConfigMap model
// (a volume), as a vLLM Deployment reads its token and model settings.
func readHome(spec *v1.PodSpec) {
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "model", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "model"}}}})
	c := &spec.Containers[0]
	c.Env = append(c.Env, v1.EnvVar{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}})
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "model", MountPath: "/etc/model"})
}

// createHome creates what readHome reads: Secret hf (token hf_one) and
// ConfigMap model, which it returns.
func createHome(t *testing.T, cp *harness.ControlPlane, ns string) *v1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hf"}, StringData: map[string]string{"token": "hf_one"}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	model := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "model"}, Data: map[string]string{"config.json": `{"model": "llama-3-8b"}`}}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, model, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return model
}

// TestSecretsAndConfigMapsTravel: production reading a Secret (env) and
// a ConfigMap (volume) is moved to the overflow node by a research claim;
// each remote pod reads copies of both in the remote cluster, owned by it;
// a changed Secret reaches every copy; the copies go with the remote pods.
func TestSecretsAndConfigMapsTravel(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	ctx := context.Background()
	name := "ovf-secrets"
	deleteNodeAtEnd(t, cp, name)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("ovf-secrets-gpu", 8).Fabric("l1", "s1", "b1").Obj())
	node := startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	defer node.stop()
	startScheduler(t, cp)

	model := createHome(t, cp, ns)
	d := harness.InferenceDeployment(ns, "chat", 4, 2)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	readHome(&d.Spec.Template.Spec)
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "chat", intstr.FromInt32(1)))
	waitReadyOn(t, cp, ns, "chat", "ovf-secrets-gpu", 4)

	harness.CreatePods(t, cp.Client, harness.Pod(ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	waitReadyOn(t, cp, ns, "chat", name, 4)

	// copies checks every remote pod's copies hold token.
	copies := func(token string) (bool, string) {
		var bad []string
		moved := 0
		for _, p := range homePods(t, cp, ns, "chat") {
			if p.Spec.NodeName != name || p.DeletionTimestamp != nil {
				continue
			}
			moved++
			r, err := remoteOf(ctx, rcp, p.UID)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: remote pod: %v", p.Name, err))
				continue
			}
			id := r.Name
			var env *v1.EnvVar
			for i, e := range r.Spec.Containers[0].Env {
				if e.Name == "HF_TOKEN" {
					env = &r.Spec.Containers[0].Env[i]
				}
			}
			if env == nil || env.ValueFrom == nil || env.ValueFrom.SecretKeyRef == nil || env.ValueFrom.SecretKeyRef.Name != kube.SecretCopy(id, "hf") {
				bad = append(bad, fmt.Sprintf("%s: remote env HF_TOKEN = %+v, want Secret %s", p.Name, env, kube.SecretCopy(id, "hf")))
			}
			var vol *v1.Volume
			for i := range r.Spec.Volumes {
				if r.Spec.Volumes[i].Name == "model" {
					vol = &r.Spec.Volumes[i]
				}
			}
			if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != kube.ConfigMapCopy(id, "model") {
				bad = append(bad, fmt.Sprintf("%s: remote volume model = %+v, want ConfigMap %s", p.Name, vol, kube.ConfigMapCopy(id, "model")))
			}
			s, err := rcp.Client.CoreV1().Secrets(remoteNamespace).Get(ctx, kube.SecretCopy(id, "hf"), metav1.GetOptions{})
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("%s: Secret copy: %v", p.Name, err))
			case string(s.Data["token"]) != token:
				bad = append(bad, fmt.Sprintf("%s: Secret copy holds another token", p.Name)) // never the value
			case len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != r.UID:
				bad = append(bad, fmt.Sprintf("%s: Secret copy owned by %+v, want the remote pod %s", p.Name, s.OwnerReferences, r.UID))
			}
			c, err := rcp.Client.CoreV1().ConfigMaps(remoteNamespace).Get(ctx, kube.ConfigMapCopy(id, "model"), metav1.GetOptions{})
			if err != nil || c.Data["config.json"] != model.Data["config.json"] {
				bad = append(bad, fmt.Sprintf("%s: ConfigMap copy %v (%v)", p.Name, c.Data, err))
			}
		}
		if moved != 4 {
			bad = append(bad, fmt.Sprintf("%d replicas on the overflow node, want 4", moved))
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	}
	if ok, why := copies("hf_one"); !ok {
		t.Fatalf("after the claim: %s", why)
	}

	secret, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "hf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["token"] = []byte("hf_two")
	if _, err := cp.Client.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var why string
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		var ok bool
		ok, why = copies("hf_two")
		return ok, nil
	}, func() string { return "the changed Secret in every copy: " + why })

	// The Deployment scales to zero: the remote pods and their copies go
	// with its pods.
	scale, err := cp.Client.AppsV1().Deployments(ns).GetScale(ctx, "chat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 0
	if _, err := cp.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "chat", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: kube.LabelNode + "=" + name}
	var left string
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		s, err := rcp.Client.CoreV1().Secrets(remoteNamespace).List(ctx, sel)
		if err != nil {
			return false, err
		}
		c, err := rcp.Client.CoreV1().ConfigMaps(remoteNamespace).List(ctx, sel)
		if err != nil {
			return false, err
		}
		left = fmt.Sprintf("%d remote pods, %d Secret and %d ConfigMap copies", len(remotePods(t, rcp, name)), len(s.Items), len(c.Items))
		return len(s.Items) == 0 && len(c.Items) == 0 && len(remotePods(t, rcp, name)) == 0, nil
	}, func() string {
		return "no remote pods, Secret or ConfigMap copies left for " + name + "; left: " + left
	})
}

// TestMissingSecretHoldsThePodBack: a pod bound to the overflow node that
// reads a Secret that does not exist waits, as kubelet holds such a pod:
// an Event and its container waiting with CreateContainerConfigError;
// once the Secret exists it runs.
func TestMissingSecretHoldsThePodBack(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	ctx := context.Background()
	name := "ovf-missing"
	deleteNodeAtEnd(t, cp, name)
	node := startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	defer node.stop()

	pod := harness.Pod(ns, "late").Scheduler("sluice-production").PriorityClass("production").TolerateOverflow().GPUs(1).OnNode(name).Obj()
	readHome(&pod.Spec)
	pod.Spec.Volumes = nil // the ConfigMap part is tested above; this pod reads only the Secret
	pod.Spec.Containers[0].VolumeMounts = nil
	harness.CreatePods(t, cp.Client, pod)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "late", overflownode.ReasonConfigError, `secret "hf" not found`, "env HF_TOKEN")
	harness.Eventually(t, 20*time.Second, func(context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == overflownode.ReasonConfigError {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return "the pod's container waiting with " + overflownode.ReasonConfigError })
	if got := remotePods(t, rcp, name); len(got) != 0 {
		t.Errorf("a pod whose Secret is missing was started remotely: %d remote pods", len(got))
	}

	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hf"}, StringData: map[string]string{"token": "hf_late"}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return ready(p), nil
	}, func() string { return "the pod Ready once its Secret exists" })
}

// TestSecretsTravelOverHTTPS: the HTTP provider, reached over https,
// gets the Secret and ConfigMap a pod reads with the pod; the provider's
// workload runs with them, and with the Secret's new value once it
// changes.
func TestSecretsTravelOverHTTPS(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	ctx := context.Background()
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "8"}, TLS: true})
	defer srv.Close()
	ca, err := srv.WriteCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	name := "ovf-https"
	deleteNodeAtEnd(t, cp, name)
	node := startNode(t, cp, name, overflownode.ProviderConfig{Name: "gpu-cloud", Type: overflownode.TypeHTTP,
		HTTP: &overflownode.HTTPProvider{URL: srv.URL, CAFile: ca}})
	defer node.stop()

	model := createHome(t, cp, ns)
	pod := harness.Pod(ns, "chat").Scheduler("sluice-production").PriorityClass("production").TolerateOverflow().GPUs(1).OnNode(name).Obj()
	readHome(&pod.Spec)
	harness.CreatePods(t, cp.Client, pod)
	created, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "chat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := provider.IDFor(created.UID)
	token := func() string {
		env, _ := srv.Env(id, pod.Spec.Containers[0].Name)
		return env["HF_TOKEN"]
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		return token() == "hf_one", nil
	}, func() string { return "the provider's workload runs with HF_TOKEN from the Secret" })
	if b, ok := srv.File(id, "model", "config.json"); !ok || string(b) != model.Data["config.json"] {
		t.Errorf("the provider's workload has config.json = %q (%v), want the ConfigMap's", b, ok)
	}

	secret, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "hf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["token"] = []byte("hf_two")
	if _, err := cp.Client.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		return token() == "hf_two", nil
	}, func() string { return "the provider's workload runs with the changed Secret" })
}
