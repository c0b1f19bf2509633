// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestTenantOutsideItsNamespacesClaimsNothing: with the shipped tenancy
// policy, a pod of the research PriorityClass in a namespace not labelled
// for research claims nothing (no ResearchClaim, no production pod moved),
// and one of the production class there never runs on the overflow node;
// each is told which setting keeps it out.
func TestTenantOutsideItsNamespacesClaimsNothing(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	tenant := harness.NewNamespace(t, cp.Client)
	// The tenant's namespace is in neither class's namespaces; the
	// scheduler starts after, so its first list sees that.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, overflow.ResearchNamespaceLabel, overflow.ProductionNamespaceLabel)
	if _, err := cp.Client.CoreV1().Namespaces().Patch(context.Background(), tenant, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster(t, cp, "tn", 1, 1, 1, 64, false)
	startScheduler(t, cp, 600)
	harness.CreateDeployment(t, cp, harness.InferenceDeployment(ns, "serve", 1, 8), nil)
	waitPlaced(t, cp, ns, "serve", 1, func(n string) bool { return n != "" && n != "tn-overflow" }, "on the physical node")
	serving := podsOf(t, cp, ns, "serve")[0]
	harness.WatchInvariants(t, cp, ns, 64).Arm()
	stopWatching := harness.ExpectNeverBound(t, cp.Client, tenant, "intruder")

	harness.CreatePods(t, cp.Client, harness.Pod(tenant, "intruder").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForEvent(t, cp.Client, tenant, "Pod", "intruder", "FailedScheduling", overflow.ResearchNamespacesSetting)
	// Production there tolerates the overflow node, whose room is free,
	// but is not production for sluice.
	harness.CreateDeployment(t, cp, harness.InferenceDeployment(tenant, "spill", 1, 8), nil)
	harness.WaitForEvent(t, cp.Client, tenant, "Pod", "", "FailedScheduling", overflow.ProductionNamespacesSetting)
	for _, p := range podsOf(t, cp, tenant, "spill") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of a namespace outside %s was bound to %s", p.Name, overflow.ProductionNamespacesSetting, p.Spec.NodeName)
		}
	}
	if claims := claimsOf(t, cp, tenant); len(claims) != 0 {
		t.Errorf("a pod outside %s made %d ResearchClaims", overflow.ResearchNamespacesSetting, len(claims))
	}
	if now := podsOf(t, cp, ns, "serve"); len(now) != 1 || now[0].UID != serving.UID {
		t.Fatalf("production was moved for a pod outside %s: %d pods now", overflow.ResearchNamespacesSetting, len(now))
	}

	// Research of a namespace the policy selects claims; what it is told
	// counts the other namespace's pods and never names them. The
	// tenant's pods go first: they would take the room it frees.
	stopWatching()
	if err := cp.Client.CoreV1().Namespaces().Delete(context.Background(), tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	}, func() string { return "the tenant's pods are not gone" })
	lab := harness.NewNamespace(t, cp.Client)
	harness.CreatePods(t, cp.Client, harness.Pod(lab, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForEvent(t, cp.Client, lab, "Pod", "train", "ClaimingGPUs", "1 of other namespaces")
	harness.WaitForPodsBound(t, cp.Client, lab, "train")
	waitPlaced(t, cp, ns, "serve", 1, func(n string) bool { return n == "tn-overflow" }, "on the overflow node")
	said := harness.ObjectEvents(t, cp.Client, lab, "Pod", "")
	for _, c := range claimsOf(t, cp, lab) {
		said = append(said, "claim status: "+c.Status.Message)
	}
	for _, e := range said {
		if strings.Contains(e, ns) || strings.Contains(e, "serve") {
			t.Errorf("namespace %s was told about namespace %s's objects: %q", lab, ns, e)
		}
	}
}
