// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package foundation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/test/harness"
)

// TestTenancyPolicyAtTheAPI installs the chart with its defaults on a
// real apiserver and acts as a tenant who may create pods anywhere and
// ResearchClaims (RBAC granted too widely, as happens): the chart's
// ValidatingAdmissionPolicy refuses the research and production
// PriorityClasses outside the namespaces of the scheduler's tenancy
// policy, naming the setting, and every ResearchClaim write but the
// scheduler's own. The shipped research class lets no other scheduler
// preempt: its pods carry preemptionPolicy Never. The shipped scheduler
// may patch pods only with Slurm placeholders on (SubjectAccessReview).
// The overflow node, as its ServiceAccount, writes only its own Node,
// deletes only pods bound to it, and of other pods' status writes only
// their warm-instance condition; and only production's namespaces reach
// the overflow node, named in spec.nodeName or bound by any scheduler.
func TestTenancyPolicyAtTheAPI(t *testing.T) {
	cp := harness.StartStockControlPlane(t)
	harness.CreateObjects(t, cp, chartObjects(t, "--set", "overflowNode.enabled=true"))
	ctx := context.Background()
	research := harness.NewNamespace(t, cp.Client) // labelled for both classes
	tenant := "tenant-" + harness.NewNameSuffix()  // labelled for neither
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.OwnNamespace(t, cp.Client, tenant)
	grant(t, cp, "alice", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"researchclaims", "researchclaims/status"}, Verbs: []string{"*"}})
	alice := clientsAs(t, cp, "alice", "system:authenticated")
	scheduler := clientsAs(t, cp, "system:serviceaccount:sluice-system:sluice-scheduler", "system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")

	pod := func(ns, name, class string) error {
		_, err := alice.kube.CoreV1().Pods(ns).Create(ctx, harness.Pod(ns, name).PriorityClass(class).Obj(), metav1.CreateOptions{})
		return err
	}
	refused := func(err error, what string, want ...string) {
		t.Helper()
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want it refused by the admission policy", what, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refused with %q, which does not name %q", what, err, w)
			}
		}
	}
	// The policy is in force once it refuses: the apiserver compiles it
	// after it is created.
	var last error
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		last = pod(tenant, "intruder", "research")
		if last == nil {
			return false, cp.Client.CoreV1().Pods(tenant).Delete(ctx, "intruder", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		// Until then, RBAC may not know alice's role yet either.
		return strings.Contains(last.Error(), "overflow.researchNamespaces"), nil
	}, func() string {
		return fmt.Sprintf("a research pod in namespace %s (no tenancy labels) is not refused by the admission policy: %v", tenant, last)
	})
	refused(pod(tenant, "intruder", "research"), "a research pod outside the research namespaces", "overflow.researchNamespaces", tenant)
	refused(pod(tenant, "spill", "production"), "a production pod outside the production namespaces", "overflow.productionNamespaces", tenant)
	if err := pod(tenant, "plain", ""); err != nil {
		t.Errorf("a pod of no class in %s: %v, want it admitted", tenant, err)
	}
	// Tolerating the overflow nodes is asking to run at the providers:
	// production's namespaces only, when created or added later.
	tolerating := harness.Pod(tenant, "stowaway").TolerateOverflow().Obj()
	_, err := alice.kube.CoreV1().Pods(tenant).Create(ctx, tolerating, metav1.CreateOptions{})
	refused(err, "a pod tolerating the overflow nodes outside the production namespaces", "tolerating the overflow nodes", tenant)
	plain, err := alice.kube.CoreV1().Pods(tenant).Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain.Spec.Tolerations = append(plain.Spec.Tolerations, tolerating.Spec.Tolerations...)
	_, err = alice.kube.CoreV1().Pods(tenant).Update(ctx, plain, metav1.UpdateOptions{})
	refused(err, "a toleration of the overflow nodes added to a pod outside the production namespaces", "tolerating the overflow nodes")
	if err := pod(research, "train", "research"); err != nil {
		t.Fatalf("a research pod in a research namespace: %v", err)
	}
	if _, err := alice.kube.CoreV1().Pods(research).Create(ctx, harness.Pod(research, "serve").TolerateOverflow().Obj(), metav1.CreateOptions{}); err != nil {
		t.Errorf("a pod tolerating the overflow nodes in a production namespace: %v", err)
	}
	got, err := cp.Client.CoreV1().Pods(research).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.PreemptionPolicy; p == nil || *p != v1.PreemptNever {
		t.Errorf("a pod of the shipped research class has preemptionPolicy %v, want Never: the default scheduler would preempt production for it", p)
	}

	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "ResearchClaim",
		"metadata": map[string]any{"name": "c", "namespace": research},
		"spec": map[string]any{"key": research + "/train", "domain": "l1", "timeoutSeconds": int64(600),
			"claimants": []any{map[string]any{"name": "train", "uid": string(got.UID), "node": "n1"}}, "victims": []any{}},
	}}
	claims := func(c clients) dynamic.ResourceInterface {
		return c.dyn.Resource(v1alpha1.Resource).Namespace(research)
	}
	const byScheduler = "written by the sluice scheduler only"
	_, err = claims(alice).Create(ctx, claim, metav1.CreateOptions{})
	refused(err, "a ResearchClaim created by a tenant", byScheduler)
	created, err := claims(scheduler).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a ResearchClaim created by the scheduler: %v", err)
	}
	created.Object["status"] = map[string]any{"phase": "Freed"}
	_, err = claims(alice).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	refused(err, "a ResearchClaim's status written by a tenant", byScheduler)
	refused(claims(alice).Delete(ctx, "c", metav1.DeleteOptions{}), "a ResearchClaim deleted by a tenant", byScheduler)
	if err := claims(scheduler).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Errorf("a ResearchClaim deleted by the scheduler: %v", err)
	}

	// RBAC as shipped: the scheduler may patch pods only with Slurm
	// placeholders on (their RBAC is a separate file, and a chart toggle).
	sa := "system:serviceaccount:sluice-system:sluice-scheduler"
	may := func(verb, resource string) bool {
		t.Helper()
		review, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: research, Verb: verb, Resource: resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return review.Status.Allowed
	}
	if !may("get", "pods") || !may("create", "pods/eviction") {
		t.Fatalf("the shipped scheduler cannot get pods or evict them: the review itself is wrong")
	}
	if may("patch", "pods") {
		t.Errorf("the shipped scheduler may patch pods with Slurm placeholders off")
	}
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "manifests", "rbac-slurm-placeholders.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	harness.CreateObjects(t, cp, harness.DecodeYAML(t, data))
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) { return may("patch", "pods"), nil },
		func() string {
			return "with manifests/rbac-slurm-placeholders.yaml the scheduler still may not patch pods"
		})
	var rendered []string
	for _, o := range harness.DecodeYAML(t, harness.Helm(t, "template", "sluice", "charts/sluice", "-n", "sluice-system", "--set", "config.slurm.placeholders.enabled=true")) {
		if strings.HasSuffix(o.GetName(), ":slurm-placeholders") {
			rendered = append(rendered, o.GetKind())
		}
	}
	if strings.Join(rendered, ",") != "ClusterRole,ClusterRoleBinding" {
		t.Errorf("the chart with placeholders on renders %v of sluice-scheduler:slurm-placeholders, want its ClusterRole and ClusterRoleBinding", rendered)
	}

	// A research namespace's own admins (Kubernetes' namespace roles, the
	// most a tenant is given) cannot read its ResearchClaims, which name
	// the victims in other namespaces: the CRD aggregates into no
	// namespace role. They see their claims as Events and PodGroup
	// conditions, which count other tenants' pods and never name them.
	if _, err := cp.Client.RbacV1().RoleBindings(research).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bobMay := func(verb, group, resource string) bool {
		t.Helper()
		review, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "bob", Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: research, Verb: verb, Group: group, Resource: resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return review.Status.Allowed
	}
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) { return bobMay("delete", "", "pods"), nil },
		func() string {
			return "the research namespace's admin may not delete its own pods: the review itself is wrong"
		})
	for _, verb := range []string{"get", "list", "watch"} {
		if bobMay(verb, v1alpha1.GroupName, "researchclaims") {
			t.Errorf("the research namespace's admin may %s its ResearchClaims, which name other namespaces' pods", verb)
		}
	}

	overflowNode(t, cp, research)

	// Only production's namespaces reach the overflow node, however the
	// pod gets there: named in spec.nodeName, or bound by any scheduler.
	direct := harness.Pod(tenant, "direct").Obj()
	direct.Spec.NodeName = "sluice-overflow"
	_, err = cp.Client.CoreV1().Pods(tenant).Create(ctx, direct, metav1.CreateOptions{})
	refused(err, "a pod outside the production namespaces naming the overflow node", "the overflow node sluice-overflow runs pods at external providers", tenant)
	if err := pod(tenant, "unbound", ""); err != nil {
		t.Fatal(err)
	}
	binding := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "unbound"}, Target: v1.ObjectReference{Kind: "Node", Name: "sluice-overflow"}}
	refused(cp.Client.CoreV1().Pods(tenant).Bind(ctx, binding, metav1.CreateOptions{}), "binding a pod outside the production namespaces to the overflow node",
		"the overflow node sluice-overflow runs pods at external providers")
	if err := pod(research, "serve-2", ""); err != nil {
		t.Fatal(err)
	}
	binding = &v1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: research, Name: "serve-2"}, Target: v1.ObjectReference{Kind: "Node", Name: "sluice-overflow"}}
	if err := cp.Client.CoreV1().Pods(research).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Errorf("binding a pod of a production namespace to the overflow node: %v", err)
	}
}

// overflowNode checks what the shipped overflow node may write, as its
// ServiceAccount: its own Node and the pods bound to it, and of other
// pods' status only the warm-instance condition.
func overflowNode(t *testing.T, cp *harness.ControlPlane, ns string) {
	ctx := context.Background()
	vk := clientsAs(t, cp, "system:serviceaccount:sluice-system:sluice-overflow-node",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated").kube
	harness.CreateNodes(t, cp.Client, harness.GPUNode("gpu-1", 8).Obj())
	bound := func(name, node string) {
		p := harness.Pod(ns, name).Obj()
		p.Spec.NodeName = node
		harness.CreatePods(t, cp.Client, p)
	}
	bound("on-overflow", "sluice-overflow")
	bound("on-gpu", "gpu-1")
	const refusal = "the overflow node writes only"
	refused := func(err error, what string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), refusal) {
			t.Errorf("the overflow node %s: %v, want it refused by its admission policy", what, err)
		}
	}
	// In force once it refuses (the apiserver compiles it after it is
	// created).
	label := []byte(`{"metadata":{"labels":{"taken":"true"}}}`)
	harness.Eventually(t, harness.DefaultTimeout, func(context.Context) (bool, error) {
		_, err := vk.CoreV1().Nodes().Patch(ctx, "gpu-1", types.MergePatchType, label, metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), refusal), nil
	}, func() string { return "the overflow node may still label a physical node" })
	own := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sluice-overflow", Labels: map[string]string{"type": "virtual-kubelet"}}}
	if _, err := vk.CoreV1().Nodes().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Errorf("the overflow node creating its own Node: %v", err)
	} else {
		t.Cleanup(func() {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), "sluice-overflow", metav1.DeleteOptions{})
		})
	}
	refused(vk.CoreV1().Pods(ns).Delete(ctx, "on-gpu", metav1.DeleteOptions{}), "deleting a pod of a physical node")
	warm := []byte(`{"status":{"conditions":[{"type":"overflow.sluice.dev/WarmReady","status":"False","reason":"WarmStarting"}]}}`)
	if _, err := vk.CoreV1().Pods(ns).Patch(ctx, "on-gpu", types.StrategicMergePatchType, warm, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("the overflow node reporting a victim's warm instance: %v", err)
	}
	failed := []byte(`{"status":{"phase":"Failed"}}`)
	_, err := vk.CoreV1().Pods(ns).Patch(ctx, "on-gpu", types.StrategicMergePatchType, failed, metav1.PatchOptions{}, "status")
	refused(err, "failing a pod of a physical node")
	if _, err := vk.CoreV1().Pods(ns).Patch(ctx, "on-overflow", types.StrategicMergePatchType, failed, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("the overflow node failing a pod bound to it: %v", err)
	}
	if err := vk.CoreV1().Pods(ns).Delete(ctx, "on-overflow", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the overflow node deleting a pod bound to it: %v", err)
	}
}

type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

// clientsAs reach cp as user, in groups (impersonated).
func clientsAs(t *testing.T, cp *harness.ControlPlane, user string, groups ...string) clients {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube, dyn}
}

// grant gives user rules cluster-wide, until the test ends.
func grant(t *testing.T, cp *harness.ControlPlane, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "test-" + user + "-" + harness.NewNameSuffix()
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
