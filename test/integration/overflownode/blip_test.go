// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestProviderBlipKeepsServing: the remote cluster's apiserver refuses
// only the kubernetes provider's node list (its capacity call, which RBAC
// takes away) for several times providerFailureTimeoutSeconds. The overflow
// node sends that provider nothing new, but the pods whose remote
// workloads it still lists, and lists Ready, keep running and Ready, on the
// same remote pods: a watch sees no pod fail, leave or turn unready, and
// the node stays Ready (taking no new pods). When
// the list is allowed again, the provider is healthy again.
func TestProviderBlipKeepsServing(t *testing.T) {
	cp := harness.Shared(t)
	rcp := remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	ctx := context.Background()
	name := "ovf-blip"
	deleteNodeAtEnd(t, cp, name)

	// The provider's identity at the remote cluster: its workloads in
	// its namespace, and the node list as a separate grant.
	user := "overflow-provider-" + harness.NewNameSuffix()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "secrets", "configmaps"}, Verbs: []string{"*"}}}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNamespace, Name: user}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}
	nodesRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user + "-nodes"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}}
	nodesBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-nodes"}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user + "-nodes"}}
	rbac := rcp.Client.RbacV1()
	if _, err := rbac.Roles(remoteNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(remoteNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, nodesRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowNodes := func() {
		t.Helper()
		if _, err := rbac.ClusterRoleBindings().Create(ctx, nodesBinding.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allowNodes()
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(ctx, nodesBinding.Name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, nodesRole.Name, metav1.DeleteOptions{})
		_ = rbac.RoleBindings(remoteNamespace).Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = rbac.Roles(remoteNamespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	kubeconfig, err := rcp.KubeconfigAs(t.TempDir(), user)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	node := startNodeWith(t, cp, name, func(c *overflownode.Config) { c.ProviderFailureTimeoutSeconds = ptr.To(int64(timeout / time.Second)) },
		overflownode.ProviderConfig{Name: "remote", Type: overflownode.TypeKubernetes, Priority: 1,
			Kubernetes: &overflownode.KubernetesProvider{Kubeconfig: kubeconfig, Namespace: remoteNamespace}})
	defer node.stop()

	serving := []string{"serve-0", "serve-1"}
	for _, n := range serving {
		p := harness.Pod(ns, n).PriorityClass("production").TolerateOverflow().GPUs(1).Obj()
		p.Spec.NodeName = name
		harness.CreatePods(t, cp.Client, p)
	}
	uids := map[string]types.UID{}
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		for _, n := range serving {
			p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil || !ready(p) {
				return false, nil
			}
			uids[n] = p.UID
		}
		return true, nil
	}, func() string { return "both pods Ready on the overflow node" })
	remoteNames := map[string]string{}
	for n, uid := range uids {
		r, err := remoteOf(ctx, rcp, uid)
		if err != nil {
			t.Fatal(err)
		}
		remoteNames[n] = r.Name
	}

	// From here on no pod may fail, go, or turn unready.
	var violations harness.Violations
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		switch {
		case e.New == nil:
			violations.Addf("pod %s deleted during the blip", e.Old.Name)
		case e.New.Status.Phase == v1.PodFailed:
			violations.Addf("pod %s failed during the blip: %s: %s", e.New.Name, e.New.Status.Reason, e.New.Status.Message)
		case e.Old != nil && ready(e.Old) && !ready(e.New):
			violations.Addf("pod %s turned unready during the blip", e.New.Name)
		}
	})
	providerHealthy := func() bool {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o, err := offer.Of(n, true)
		if err != nil || len(o.Providers) != 1 {
			t.Fatalf("overflow node %s offers %+v (%v), want the provider remote", name, o, err)
		}
		return o.Providers[0].Healthy
	}

	if err := rbac.ClusterRoleBindings().Delete(ctx, nodesBinding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) { return !providerHealthy(), nil },
		func() string { return "the provider whose node list is refused is not offered as healthy" })
	down := time.Now()
	// The window under test: four failure timeouts with the capacity call
	// refused, the provider's own listing answering.
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		// A NotReady node would have its pods tainted away by the node
		// lifecycle controller, though they serve.
		if ok, _ := nodeReady(t, cp, name); !ok {
			violations.Addf("overflow node %s NotReady while its provider still lists its workloads", name)
		}
		return time.Since(down) > 4*timeout && !providerHealthy(), nil
	}, func() string { return fmt.Sprintf("the node list refused for %s", 4*timeout) })
	for n, uid := range uids {
		r, err := remoteOf(ctx, rcp, uid)
		if err != nil {
			t.Errorf("pod %s: its remote pod is gone after the blip: %v", n, err)
		} else if r.Name != remoteNames[n] {
			t.Errorf("pod %s runs on remote pod %s after the blip, want %s (the same)", n, r.Name, remoteNames[n])
		}
	}

	allowNodes()
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) { return providerHealthy(), nil },
		func() string { return "the provider healthy again once its node list is allowed" })
	violations.Check(t)
}
