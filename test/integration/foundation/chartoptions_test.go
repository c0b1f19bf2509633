// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/test/harness"
)

// render is `helm template` of the chart with args, by kind and name.
func render(t *testing.T, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range harness.DecodeYAML(t, harness.Helm(t, append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system"}, args...)...)) {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}

// helmFails is the error output of a `helm template` that must fail.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(harness.ModuleRoot(t), "bin", "helm"), append([]string{"template", "sluice", "charts/sluice", "-n", "sluice-system"}, args...)...)
	cmd.Dir = harness.ModuleRoot(t)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("helm template %v rendered; want it refused", args)
	}
	return string(out)
}

// podSpec is a rendered Deployment's pod spec as YAML, and its first
// container's.
func podSpec(t *testing.T, objs map[string]*unstructured.Unstructured, name string) (pod, container string) {
	t.Helper()
	d := objs["Deployment/"+name]
	if d == nil {
		t.Fatalf("no Deployment %s rendered", name)
	}
	spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	p, _ := yaml.Marshal(spec)
	c, _ := yaml.Marshal(containers[0])
	return string(p), string(c)
}

func contains(t *testing.T, what, in string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(in, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, in)
		}
	}
}

// TestHelmChartOptions: each deployment option the values document
// renders as it says: image pull secrets, extra arguments, environment,
// volumes and mounts for both binaries (the Slurm example mounts
// topology.conf and the slurmrestd CA), the
// scheduler's PodDisruptionBudget, the overflow node's placement; a
// misspelt value and a cluster outside kubeVersion are refused, naming
// what is wrong.
func TestHelmChartOptions(t *testing.T) {
	objs := render(t, "--set", "overflowNode.enabled=true",
		"--set", "imagePullSecrets[0].name=regcred",
		"--set", "scheduler.extraArgs[0]=--kube-api-qps=77",
		"--set", "overflowNode.extraArgs[0]=--v=4",
		"--set", "overflowNode.extraEnv[0].name=HTTPS_PROXY,overflowNode.extraEnv[0].value=http://proxy:3128",
		"--set", "overflowNode.nodeSelector.pool=control",
		"--set", "overflowNode.tolerations[0].key=dedicated,overflowNode.tolerations[0].operator=Exists",
		"--set", "overflowNode.extraVolumes[0].name=provider-ca,overflowNode.extraVolumes[0].secret.secretName=provider-ca",
		"--set", "overflowNode.extraVolumeMounts[0].name=provider-ca,overflowNode.extraVolumeMounts[0].mountPath=/etc/provider-ca")
	pod, c := podSpec(t, objs, "sluice-scheduler")
	contains(t, "the scheduler's pod", pod, "imagePullSecrets:\n- name: regcred")
	contains(t, "the scheduler's container", c, "- --kube-api-qps=77", "- --config=/etc/sluice/config.yaml")
	pod, c = podSpec(t, objs, "sluice-overflow-node")
	contains(t, "the overflow node's pod", pod, "imagePullSecrets:\n- name: regcred", "nodeSelector:\n  pool: control",
		"tolerations:\n- key: dedicated\n  operator: Exists", "podAntiAffinity", "secretName: provider-ca")
	contains(t, "the overflow node's container", c, "- --v=4", "name: HTTPS_PROXY", "name: POD_IP", "mountPath: /etc/provider-ca")
	if pdb := objs["PodDisruptionBudget/sluice-scheduler"]; pdb == nil {
		t.Error("2 scheduler replicas render no PodDisruptionBudget")
	} else if v, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "minAvailable"); fmt.Sprint(v) != "1" {
		t.Errorf("the scheduler's PodDisruptionBudget: minAvailable %v, want 1", v)
	}
	for _, set := range []string{"scheduler.replicas=1", "scheduler.podDisruptionBudget=false"} {
		if objs := render(t, "--set", set); objs["PodDisruptionBudget/sluice-scheduler"] != nil {
			t.Errorf("%s renders the scheduler's PodDisruptionBudget", set)
		}
	}
	if pod, _ := podSpec(t, render(t, "--set", "overflowNode.enabled=true", "--set-json", "overflowNode.affinity={}"), "sluice-overflow-node"); strings.Contains(pod, "affinity") {
		t.Errorf("overflowNode.affinity={} keeps an affinity:\n%s", pod)
	}

	// The Slurm example: every file the Slurm configuration reads is
	// mounted where the configuration says.
	objs = render(t, "-f", "charts/sluice/examples/slurm.yaml")
	pod, c = podSpec(t, objs, "sluice-scheduler")
	contains(t, "the scheduler's pod (Slurm example)", pod, "name: slurm-topology", "secretName: slurmrestd-ca")
	contains(t, "the scheduler's container (Slurm example)", c, "mountPath: /etc/slurm/topology.conf", "mountPath: /etc/sluice/slurmrestd-ca",
		"mountPath: /var/run/secrets/sluice/slurm")
	cm := ""
	for key, o := range objs {
		if strings.HasPrefix(key, "ConfigMap/sluice-scheduler-config") {
			cm, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	contains(t, "the scheduler's configuration (Slurm example)", cm, "slurmTopologyFile: /etc/slurm/topology.conf",
		"caFile: /etc/sluice/slurmrestd-ca/ca.crt", "source: SlurmTopology")
	// Helm's global values (an umbrella chart's) pass the strict schema.
	render(t, "--set", "global.imageRegistry=example")

	// Refused: a misspelt value (the schema is strict), an image pull
	// secret without a name, a cluster outside kubeVersion.
	contains(t, "a misspelt value's error", helmFails(t, "--set", "scheduler.replica=3"), "/scheduler", "replica")
	contains(t, "a misspelt top-level value's error", helmFails(t, "--set", "overflownode.enabled=true"), "overflownode")
	contains(t, "a nameless pull secret's error", helmFails(t, "--set", "imagePullSecrets[0].nam=x"), "imagePullSecrets")
	for _, v := range []string{"1.36.5", "1.39.0"} {
		contains(t, fmt.Sprintf("kube-version %s's error", v), helmFails(t, "--kube-version", v), "kubeVersion")
	}
	render(t, "--kube-version", "1.38.2")
}
