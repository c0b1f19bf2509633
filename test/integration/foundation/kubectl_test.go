// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-sched/sluice/internal/localcluster"
	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	podgroupv1alpha1 "github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestKubectlSluice runs the real kubectl-sluice binary against a real
// apiserver holding what sluice writes (a gang's PodGroup condition and
// Events, pods on fabric leaves and on an overflow node, a research claim
// part way) and checks each command says it, in numbers.
func TestKubectlSluice(t *testing.T) {
	cp := harness.StartStockControlPlane(t)
	root := harness.ModuleRoot(t)
	if err := harness.InstallCRDs(cp, root, "manifests/crds/scheduling.x-k8s.io_podgroups.yaml", "manifests/crds/claims.sluice.dev_researchclaims.yaml"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.CreatePriorityClasses(ctx, cp.Client); err != nil {
		t.Fatal(err)
	}
	ns := harness.NewNamespace(t, cp.Client)
	harness.CreateNodes(t, cp.Client,
		harness.GPUNode("k1", 8).Fabric("leafA", "s1", "b1").Obj(), harness.GPUNode("k2", 8).Fabric("leafA", "s1", "b1").Obj(),
		harness.GPUNode("k3", 8).Fabric("leafB", "s1", "b1").Obj(), harness.GPUNode("k4", 8).Fabric("leafB", "s1", "b1").Obj(),
		harness.OverflowNode("k-overflow", 64).Obj())
	harness.CreatePods(t, cp.Client,
		harness.Pod(ns, "train-0").PriorityClass("research").GPUs(8).Label("scheduling.x-k8s.io/pod-group", "train").OnNode("k1").Obj(),
		harness.Pod(ns, "train-1").PriorityClass("research").GPUs(8).Label("scheduling.x-k8s.io/pod-group", "train").Obj(),
		harness.Pod(ns, "serve-0").PriorityClass("production").GPUs(2).OnNode("k3").Obj(),
		harness.Pod(ns, "serve-1").PriorityClass("production").GPUs(4).OnNode("k-overflow").Obj())
	harness.CreateLabelPodGroup(t, cp, harness.LabelPodGroup(ns, "train", 2, 60, nil))

	// What sluice would have written: the gang's condition, an Event on a
	// member, the overflow node's condition on the pod it runs, a claim.
	pg, err := dyn.Resource(podgroupv1alpha1.Resource).Namespace(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(pg.Object, []any{map[string]any{"type": "sluice.dev/ResearchClaim", "status": "True", "reason": "Evicting",
		"message": "3 of 10 production pods moved, 2 moving, 5 to go", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(podgroupv1alpha1.Resource).Namespace(ns).UpdateStatus(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Events(ns).Create(ctx, &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "train-1.fs", Namespace: ns},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "train-1"}, Reason: "FailedScheduling", Type: v1.EventTypeWarning,
		Message: "0/5 nodes are available: gang train needs 2 nodes of 8 GPUs under one leaf; leafB has 6 free", Source: v1.EventSource{Component: "sluice-research"},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 3}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	serve, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "serve-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serve.Status.Conditions = append(serve.Status.Conditions, v1.PodCondition{Type: offer.ProviderCondition, Status: v1.ConditionTrue, Reason: "cloud",
		LastTransitionTime: metav1.NewTime(time.Now().Add(-90 * time.Minute))}, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
	if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(ctx, serve, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim-train"}}
	claim.Spec = v1alpha1.ResearchClaimSpec{Key: ns + "/train", Domain: "leafA", TimeoutSeconds: 600, ReplacementTimeoutSeconds: 300,
		Claimants: []v1alpha1.Claimant{{Name: "train-1", UID: "u1", Node: "k2"}}}
	for i := range 10 {
		claim.Spec.Victims = append(claim.Spec.Victims, v1alpha1.Victim{Namespace: ns, Name: "v" + string(rune('a'+i)), UID: types.UID("v" + string(rune('a'+i))),
			Node: "k2", Owner: v1alpha1.Owner{Kind: "ReplicaSet", Name: "serve", UID: "rs"}, Budget: "serve-pdb", Target: v1alpha1.Target{Node: "k-overflow"}})
	}
	obj, err := claim.ToUnstructured()
	if err != nil {
		t.Fatal(err)
	}
	created, err := dyn.Resource(v1alpha1.Resource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]any{"phase": "Evicting", "message": "3 of 10 production pods moved, 2 moving, 5 to go; waiting for PodDisruptionBudget serve-pdb",
		"replaced": []any{"va", "vb", "vc"}, "rounds": int64(4), "progressTime": time.Now().UTC().Format(time.RFC3339),
		"evicted": []any{map[string]any{"uid": "va", "time": time.Now().UTC().Format(time.RFC3339)}, map[string]any{"uid": "vb", "time": time.Now().UTC().Format(time.RFC3339)},
			map[string]any{"uid": "vc", "time": time.Now().UTC().Format(time.RFC3339)}, map[string]any{"uid": "vd", "time": time.Now().UTC().Format(time.RFC3339)},
			map[string]any{"uid": "ve", "time": time.Now().UTC().Format(time.RFC3339)}}}
	created.Object["status"] = status
	if _, err := dyn.Resource(v1alpha1.Resource).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	bin := harness.Binary(t, "kubectl-sluice")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl sluice %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	expect := func(what, out string, wants ...string) {
		t.Helper()
		squeezed := strings.Join(strings.Fields(out), " ")
		for _, w := range wants {
			if !strings.Contains(squeezed, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("kubectl sluice %s does not say %q:\n%s", what, w, out)
			}
		}
	}
	expect("why train-1", run("why", "train-1", "-n", ns),
		"Pod "+ns+"/train-1: Pending, not bound", "Requests 8 nvidia.com/gpu", "FailedScheduling", "leafB has 6 free", "(x3)",
		"PodGroup "+ns+"/train (scheduling.x-k8s.io/v1alpha1): minMember 2, 2 members, 1 bound on 1 nodes",
		"sluice.dev/ResearchClaim", "3 of 10 production pods moved, 2 moving, 5 to go")
	expect("fabric", run("fabric"),
		"leafA  2      16    8     8         0           0      R.",
		"leafB  2      16    14    0         2           0      p.",
		"all    4      32    22    8         2           0",
		"Largest free leaf: leafB, 14 nvidia.com/gpu free.", "1 overflow node(s) not shown")
	expect("claims", run("claims"), ns, "claim-train", "leafA", "Evicting", "3/10", "waiting for PodDisruptionBudget serve-pdb")
	out := run("claims")
	if fields := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1]); len(fields) < 9 || fields[6] != "2" || fields[7] != "5" || fields[8] != "4" {
		t.Errorf("claims: MOVING, LEFT, WAVES = %v, want 2 5 4:\n%s", fields, out)
	}
	expect("overflow", run("overflow"), "serve-1", "production", "k-overflow", "cloud", "4", "yes", "90m", "Provider cloud: 1 pods, 4 nvidia.com/gpu.")
}
