// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// readsSecrets makes p read Secret hf (env) and ConfigMap model (volume).
func readsSecrets(p *v1.Pod) {
	p.Spec.Volumes = []v1.Volume{{Name: "model", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "model"}}}}}
	c := &p.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "model", MountPath: "/etc/model"}}
}

// TestSecretsAndConfigMapsArePassedOn: a pod reading a Secret that does
// not exist yet is held back with kubelet's reason; once the Secret and
// ConfigMap exist, its provider gets them with the pod, and gets the
// Secret again when it changes.
func TestSecretsAndConfigMapsArePassedOn(t *testing.T) {
	a := newFake("8")
	a.carries = offer.Carries{Volumes: []string{"configMap"}, Secrets: true, ConfigMaps: true}
	f := newFixture(t, member("a", 0, 1, a))
	events := f.node.recorder.(*record.FakeRecorder).Events
	ctx := context.Background()
	f.node.Reconcile(ctx)
	p := f.addPod(t, "llm-0", 1)
	readsSecrets(p)
	if err := f.pods.Update(p); err != nil {
		t.Fatal(err)
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "model"}, Data: map[string]string{"config.json": "{}"}}
	if _, err := f.client.CoreV1().ConfigMaps("serve").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// No error: virtual-kubelet would overwrite the status with its own.
	if err := f.node.CreatePod(ctx, p); err != nil {
		t.Fatalf("CreatePod without its Secret: %v, want it held back without an error", err)
	}
	st := f.statuses["llm-0"]
	if st.Phase != v1.PodPending || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != ReasonConfigError ||
		!strings.Contains(st.ContainerStatuses[0].State.Waiting.Message, `env HF_TOKEN: secret "hf" not found`) {
		t.Errorf("status without its Secret: %+v, want Pending with its container waiting in %s naming the env var and Secret", st, ReasonConfigError)
	}
	// Held back past the dispatch timeout: it waits, as kubelet waits.
	f.clock = f.clock.Add(2 * DefaultDispatchTimeout)
	f.node.Reconcile(ctx)
	if got := f.pod(t, "llm-0").Status; got.Phase != v1.PodPending {
		t.Errorf("held back past the dispatch timeout, the pod is %s (%s), want Pending", got.Phase, got.Reason)
	}
	if got := <-events; !strings.Contains(got, ReasonConfigError) || !strings.Contains(got, `secret "hf" not found`) {
		t.Errorf("event %q, want %s naming the Secret", got, ReasonConfigError)
	}
	if len(a.refs) != 0 {
		t.Errorf("the provider was given a pod whose Secret is missing")
	}

	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "hf"}, Data: map[string][]byte{"token": []byte("one")}}
	if _, err := f.client.CoreV1().Secrets("serve").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The reconcile dispatches it (virtual-kubelet does not call again).
	f.node.Reconcile(ctx)
	if got := dispatchedTo(f.pod(t, "llm-0")); got != "a" {
		t.Fatalf("once its Secret exists the pod is dispatched to %q, want a", got)
	}
	id := provider.IDFor(p.UID)
	sent := a.refs[id]
	if len(sent) != 1 || string(sent[0].Secrets["hf"].Data["token"]) != "one" || sent[0].ConfigMaps["model"] == nil {
		t.Fatalf("the provider was given %+v, want Secret hf (token one) and ConfigMap model", sent)
	}

	// Unchanged: nothing is passed on again.
	f.node.Reconcile(ctx)
	if len(a.refs[id]) != 1 {
		t.Errorf("unchanged Secrets were passed on again: %d times", len(a.refs[id]))
	}
	// Changed (a new resourceVersion, as the apiserver gives it).
	secret.Data["token"] = []byte("two")
	secret.ResourceVersion = "2"
	if _, err := f.client.CoreV1().Secrets("serve").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.node.Reconcile(ctx)
	if sent := a.refs[id]; len(sent) != 2 || string(sent[1].Secrets["hf"].Data["token"]) != "two" {
		t.Errorf("after the Secret changed the provider was given %d times, last %+v; want the new token passed on", len(sent), sent[len(sent)-1].Secrets["hf"])
	}
}

// TestMissingKeyAndOptionalRefs: a missing key is held back like a
// missing object; an optional missing Secret is not.
func TestMissingKeyAndOptionalRefs(t *testing.T) {
	a := newFake("8")
	a.carries = offer.Carries{Volumes: []string{"configMap", "secret"}, Secrets: true, ConfigMaps: true}
	f := newFixture(t, member("a", 0, 1, a))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	p := f.addPod(t, "llm-0", 1)
	readsSecrets(p)
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "extra", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "absent", Optional: ptrTo(true)}}})
	if err := f.pods.Update(p); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []struct {
		create func() error
	}{
		{func() error {
			_, err := f.client.CoreV1().ConfigMaps("serve").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "model"}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := f.client.CoreV1().Secrets("serve").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "hf"}, Data: map[string][]byte{"other": nil}}, metav1.CreateOptions{})
			return err
		}},
	} {
		if err := obj.create(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.node.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := f.statuses["llm-0"].ContainerStatuses[0].State.Waiting; w == nil || !strings.Contains(w.Message, "couldn't find key token in Secret serve/hf") ||
		!strings.Contains(w.Message, "env HF_TOKEN") {
		t.Fatalf("with the key missing the container waits with %+v, want the key and the env var named", w)
	}
	s, err := f.client.CoreV1().Secrets("serve").Get(ctx, "hf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte("t")
	if _, err := f.client.CoreV1().Secrets("serve").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.node.Reconcile(ctx)
	if sent := a.refs[provider.IDFor(p.UID)]; len(sent) != 1 || sent[0].Secrets["absent"] != nil || len(sent[0].Secrets) != 1 {
		t.Errorf("the provider was given %+v, want Secret hf only", sent)
	}
}

// TestOneDispatchAtATime: a second CreatePod for a pod being dispatched
// (virtual-kubelet's and the reconcile's, for a held pod) returns without
// dispatching it again.
func TestOneDispatchAtATime(t *testing.T) {
	a := newFake("8")
	a.entered, a.release = make(chan struct{}, 2), make(chan struct{})
	f := newFixture(t, member("a", 0, 1, a))
	ctx := context.Background()
	f.node.Reconcile(ctx)
	p := f.addPod(t, "llm-0", 1)
	done, second := make(chan error, 1), make(chan error, 1)
	go func() { done <- f.node.CreatePod(ctx, p) }()
	<-a.entered
	go func() { second <- f.node.CreatePod(ctx, p) }()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second CreatePod while the first dispatches: %v, want nil", err)
		}
	case <-a.entered:
		t.Errorf("a second CreatePod reached the provider while the first was dispatching")
	}
	close(a.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
