// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
)

// secretDeployment is an inference Deployment whose pods read a Hugging
// Face token from a Secret, as a typical vLLM Deployment does.
func secretDeployment(t *testing.T, cp *harness.ControlPlane, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hf"}, StringData: map[string]string{"token": "hf_not_a_real_token"}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	d := harness.InferenceDeployment(ns, name, replicas, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	d.Spec.Template.Spec.Containers[0].Env = []v1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}
	return d
}

// keepsSecretsHome is a kubernetes provider configured to carry no
// Secrets (secrets: false), as where Secrets must not leave the cluster.
func keepsSecretsHome(p overflownode.ProviderConfig) overflownode.ProviderConfig {
	p.Kubernetes.Secrets = ptr.To(false)
	return p
}

// watchNeverMoved records, at every change of a pod of app, a pod bound
// to the overflow node or one being deleted (evicted): neither may happen
// to a pod no overflow provider can run.
func watchNeverMoved(t *testing.T, cp *harness.ControlPlane, ns, app, overflowNode string) *harness.Violations {
	t.Helper()
	v := &harness.Violations{}
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		p := e.Pod()
		if p == nil || p.Labels["app"] != app {
			return
		}
		switch {
		case e.New == nil:
			v.Addf("%s was deleted (%s on %s)", p.Name, p.Status.Phase, p.Spec.NodeName)
		case p.DeletionTimestamp != nil && (e.Old == nil || e.Old.DeletionTimestamp == nil):
			v.Addf("%s is being deleted (evicted from %s)", p.Name, p.Spec.NodeName)
		case p.Spec.NodeName == overflowNode && (e.Old == nil || e.Old.Spec.NodeName != overflowNode):
			v.Addf("%s was bound to the overflow node %s", p.Name, overflowNode)
		}
	})
	return v
}

func readyOn(t *testing.T, cp *harness.ControlPlane, ns, app, node string) int {
	n := 0
	for _, p := range homePods(t, cp, ns, app) {
		if p.Spec.NodeName == node && ready(&p) && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func waitReadyOn(t *testing.T, cp *harness.ControlPlane, ns, app, node string, want int) {
	t.Helper()
	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, error) {
		return readyOn(t, cp, ns, app, node) == want, nil
	}, func() string {
		return fmt.Sprintf("%d replicas of %s Ready on %s; pods: %s", want, app, node, describe(homePods(t, cp, ns, app)))
	})
}

// TestUnportableProductionIsNeverAVictim: two nodes full of production,
// one Deployment reading a Secret (which the overflow node's provider
// does not carry), one not. A research pod that needs a whole node gets
// the node of the Deployment that can move; the Secret Deployment's pods
// are never evicted nor bound to the overflow node, and the research
// pod's Event counts them. A second research pod, which only their node
// could hold, gets no claim: its Event names them and each of them gets
// an Event saying why it stays.
func TestUnportableProductionIsNeverAVictim(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-portable"
	deleteNodeAtEnd(t, cp, name)
	// Equal nodes: without portability the planner's tie-break (name)
	// picks the Secret Deployment's node, port-a.
	harness.CreateNodes(t, cp.Client, harness.GPUNode("port-a", 8).Fabric("pl1", "ps1", "pb1").Obj())
	node := startNode(t, cp, name, keepsSecretsHome(kubeProvider(rcp, "burst-east", 0)))
	defer node.stop()
	startScheduler(t, cp)
	stuck := watchNeverMoved(t, cp, ns, "secret-llm", name)

	harness.CreateDeployment(t, cp, secretDeployment(t, cp, ns, "secret-llm", 8), harness.PDB(ns, "secret-llm", intstr.FromInt32(2)))
	waitReadyOn(t, cp, ns, "secret-llm", "port-a", 8)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("port-b", 8).Fabric("pl1", "ps1", "pb1").Obj())
	d := harness.InferenceDeployment(ns, "llm", 8, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "llm", intstr.FromInt32(2)))
	waitReadyOn(t, cp, ns, "llm", "port-b", 8)

	harness.CreatePods(t, cp.Client, harness.Pod(ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	if got := harness.WaitForPodsBound(t, cp.Client, ns, "train")["train"]; got != "port-b" {
		t.Errorf("research pod bound to %s, want port-b (the node whose production can move)", got)
	}
	waitReadyOn(t, cp, ns, "llm", name, 8)
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train", "ClaimingGPUs", "8 production pods no overflow provider can run were passed over", "env HF_TOKEN refers to Secret hf")

	// Only port-a could hold a second research pod; nothing there can move.
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "train-2").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train-2", "NoOverflowClaim", "would need 8 production pods that cannot move", "no overflow provider can run it")
	victim := homePods(t, cp, ns, "secret-llm")[0].Name
	harness.WaitForEvent(t, cp.Client, ns, "Pod", victim, "CannotMoveToOverflow", "research "+ns+"/train-2", "env HF_TOKEN refers to Secret hf")
	if n := readyOn(t, cp, ns, "secret-llm", "port-a"); n != 8 {
		t.Errorf("%d of 8 Secret replicas Ready on port-a, want 8", n)
	}
	stuck.Check(t)
}

// TestUnportablePodIsNotBoundToOverflow: with every physical GPU taken, a
// production Deployment reading a Secret is not bound to the overflow node
// (whose provider cannot run it, so it would sit pending there for good);
// it waits, saying why, and is scheduled as soon as physical GPUs free.
func TestUnportablePodIsNotBoundToOverflow(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-unbound"
	deleteNodeAtEnd(t, cp, name)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("unbound-gpu", 8).Fabric("ul1", "us1", "ub1").Obj())
	node := startNode(t, cp, name, keepsSecretsHome(kubeProvider(rcp, "burst-east", 0)))
	defer node.stop()
	startScheduler(t, cp)
	stuck := watchNeverMoved(t, cp, ns, "secret-llm", name)

	fill := harness.InferenceDeployment(ns, "fill", 8, 1)
	fill.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, fill, nil)
	waitReadyOn(t, cp, ns, "fill", "unbound-gpu", 8)

	harness.CreateDeployment(t, cp, secretDeployment(t, cp, ns, "secret-llm", 2), nil)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "secret-llm")
		n := 0
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse &&
					strings.Contains(c.Message, "OverflowCannotRunPod") && strings.Contains(c.Message, "env HF_TOKEN refers to Secret hf") {
					n++
				}
			}
		}
		return n == 2, nil
	}, func() string {
		return "both Secret replicas unschedulable, naming the overflow node's reason; pods: " + describe(homePods(t, cp, ns, "secret-llm"))
	})

	scale, err := cp.Client.AppsV1().Deployments(ns).GetScale(context.Background(), "fill", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 0
	if _, err := cp.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "fill", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyOn(t, cp, ns, "secret-llm", "unbound-gpu", 2)
	stuck.Check(t)
}
