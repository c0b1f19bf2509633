// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/kube"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestGCFindsOrphansOfRemovedNodes: the one-shot `sluice-overflow-node gc`
// (the real binary) lists the workloads at the kubernetes provider that no
// home pod runs: its own node's, and those of a node removed since
// (--node). A workload of a live pod, and one of a node it was not asked
// about, are left alone. With --delete, exactly the orphans are deleted.
func TestGCFindsOrphansOfRemovedNodes(t *testing.T) {
	cp := harness.Shared(t)
	rcp := remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	ctx := context.Background()
	suffix := harness.NewNameSuffix()
	node, removed, other := "ovf-gc-"+suffix, "ovf-gc-old-"+suffix, "ovf-gc-other-"+suffix
	for _, n := range []string{node, removed, other} {
		deleteNodeAtEnd(t, cp, n)
	}
	// Workloads as each node's provider creates them.
	create := func(at string, pod *v1.Pod) string {
		t.Helper()
		p, err := kube.FromKubeconfig(rcp.Kubeconfig, remoteNamespace, at, kube.Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := provider.IDFor(pod.UID)
		if err := p.Create(ctx, id, pod, provider.Refs{}); err != nil {
			t.Fatalf("creating workload %s for node %s: %v", id, at, err)
		}
		return id
	}
	podOn := func(name, at string) *v1.Pod {
		p := harness.Pod(ns, name).Obj()
		p.Spec.NodeName = at
		return p
	}
	live := podOn("live", node)
	harness.CreatePods(t, cp.Client, live)
	live, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	liveID := create(node, live)
	gone := func(name, at string) *v1.Pod {
		p := podOn(name, at)
		p.UID = types.UID("uid-" + name + "-" + suffix)
		return p
	}
	orphans := []string{create(node, gone("gone", node)), create(removed, gone("gone-old", removed))}
	sort.Strings(orphans)
	untouched := create(other, gone("gone-other", other))

	cfg := overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: node,
		Providers: []overflownode.ProviderConfig{{Name: "remote", Type: overflownode.TypeKubernetes,
			Kubernetes: &overflownode.KubernetesProvider{Kubeconfig: rcp.Kubeconfig, Namespace: remoteNamespace, Secrets: ptr.To(false), ConfigMaps: ptr.To(false)}}}}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "overflow-node.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	gc := func(extra ...string) string {
		t.Helper()
		args := append([]string{"gc", "--config", file, "--kubeconfig", cp.Kubeconfig, "--node", removed}, extra...)
		out, err := exec.Command(harness.Binary(t, "sluice-overflow-node"), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("sluice-overflow-node %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	remaining := func() []string {
		t.Helper()
		var ids []string
		for _, n := range []string{node, removed, other} {
			for _, p := range remotePods(t, rcp, n) {
				ids = append(ids, p.Name)
			}
		}
		sort.Strings(ids)
		return ids
	}
	all := remaining()

	listed := gc()
	for _, id := range orphans {
		if !strings.Contains(listed, id) {
			t.Errorf("gc does not list orphan %s:\n%s", id, listed)
		}
	}
	for _, id := range []string{liveID, untouched} {
		if strings.Contains(listed, id) {
			t.Errorf("gc lists %s, which it must leave alone:\n%s", id, listed)
		}
	}
	if got := remaining(); strings.Join(got, ",") != strings.Join(all, ",") {
		t.Errorf("gc without --delete changed the remote workloads: %v, were %v", got, all)
	}

	deleted := gc("--delete")
	if !strings.Contains(deleted, "2 of 2 orphans deleted") {
		t.Errorf("gc --delete said:\n%s", deleted)
	}
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		got := remaining()
		want := []string{liveID, untouched}
		sort.Strings(want)
		return strings.Join(got, ",") == strings.Join(want, ","), nil
	}, func() string { return "only the live pod's and the other node's workloads left at the provider" })
}
