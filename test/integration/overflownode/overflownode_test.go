// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflownode tests sluice-overflow-node against two real
// apiservers: the home cluster (sluice-scheduler, the ReplicaSet,
// Deployment and disruption controllers, a node simulator for the physical
// nodes) and a remote cluster that the "kubernetes" provider bursts into
// (the stock kube-scheduler and a node simulator of its own), plus the
// HTTP provider contract served by test/providerserver.
package overflownode

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/nodesim"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
	"github.com/sluice-sched/sluice/pkg/overflownode/provider/kube"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// remoteNamespace is where the kubernetes provider creates remote pods.
const remoteNamespace = "burst"

// remoteStartup is how long a remote container takes to start, so that a
// home pod's readiness can be seen to follow its remote pod's.
const remoteStartup = 1500 * time.Millisecond

func TestMain(m *testing.M) {
	harness.Main(m,
		harness.WithCRDs("manifests/crds/claims.sluice.dev_researchclaims.yaml"),
		harness.WithPriorityClasses(),
		harness.WithControllers(),
		harness.WithNetwork(),
		// Overflow nodes are served by the real overflow node, not the
		// simulator.
		harness.WithNodeSimulator(nodesim.Options{StartupDelay: 200 * time.Millisecond, Workers: 8,
			Skip: labels.SelectorFromSet(labels.Set{overflownode.LabelType: overflownode.TypeValue})}),
		harness.WithRemoteCluster(nodesim.Options{StartupDelay: remoteStartup, Workers: 8, Kubelet: true}))
}

var remoteOnce sync.Once

// remoteCluster returns the remote cluster with the burst namespace and,
// for this test, 4 nodes x 8 GPUs.
func remoteCluster(t *testing.T) *harness.ControlPlane {
	t.Helper()
	rcp := harness.Remote(t)
	remoteOnce.Do(func() {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: remoteNamespace}}
		if _, err := rcp.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	var nodes []*v1.Node
	for i := range 4 {
		nodes = append(nodes, harness.GPUNode(fmt.Sprintf("remote-%d", i), 8).Obj())
	}
	harness.CreateNodes(t, rcp.Client, nodes...)
	return rcp
}

// overflowNode is a running sluice-overflow-node.
type overflowNode struct {
	cfg     *overflownode.Config
	cancel  context.CancelFunc
	running *overflownode.Running
	once    sync.Once
}

var rbacOnce sync.Once

// nodeConfig reaches the home cluster as the overflow node's
// ServiceAccount, with the RBAC from manifests/overflow-node/ applied: the
// tests prove the shipped RBAC sufficient.
func nodeConfig(t *testing.T, cp *harness.ControlPlane) *rest.Config {
	t.Helper()
	rbacOnce.Do(func() { applyNodeRBAC(t, cp) })
	kubeconfig, err := cp.KubeconfigAs(t.TempDir(), "system:serviceaccount:sluice-system:sluice-overflow-node",
		"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// applyNodeRBAC creates the sluice-system namespace and the overflow
// node's ServiceAccount and RBAC from manifests/overflow-node/: only the
// RBAC, the node runs as the test says, not as the manifests' Deployment.
func applyNodeRBAC(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	harness.SharedNamespace(t, cp.Client, "sluice-system")
	var rbac []*unstructured.Unstructured
	for _, o := range harness.Kustomize(t, filepath.Join(harness.ModuleRoot(t), "manifests", "overflow-node")) {
		if o.GroupVersionKind().Group == "rbac.authorization.k8s.io" || o.GetKind() == "ServiceAccount" {
			rbac = append(rbac, o)
		}
	}
	harness.CreateObjects(t, cp, rbac)
}

// startNode starts an overflow node with these providers, as the binary
// does (overflownode.Providers, overflownode.Start), as its ServiceAccount.
func startNode(t *testing.T, cp *harness.ControlPlane, name string, providers ...overflownode.ProviderConfig) *overflowNode {
	t.Helper()
	return startNodeWith(t, cp, name, nil, providers...)
}

// startNodeWith is startNode with a change to the configuration.
func startNodeWith(t *testing.T, cp *harness.ControlPlane, name string, change func(*overflownode.Config), providers ...overflownode.ProviderConfig) *overflowNode {
	t.Helper()
	rc := nodeConfig(t, cp)
	cfg := &overflownode.Config{
		APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: name, Providers: providers,
		ReconcileIntervalSeconds:      ptr.To[int64](1),
		RequestTimeoutSeconds:         ptr.To[int64](3),
		ProviderFailureTimeoutSeconds: ptr.To[int64](30),
	}
	if change != nil {
		change(cfg)
	}
	cfg.Default()
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("overflow node config: %v", errs.ToAggregate())
	}
	members, err := overflownode.Providers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	running, err := overflownode.Start(ctx, rc, cfg, members)
	if err != nil {
		cancel()
		t.Fatalf("starting overflow node %s: %v", name, err)
	}
	o := &overflowNode{cfg: cfg, cancel: cancel, running: running}
	t.Cleanup(o.stop)
	harness.Eventually(t, 20*time.Second, func(context.Context) (bool, error) {
		ok, _ := nodeReady(t, cp, name)
		return ok, nil
	}, func() string {
		node, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("overflow node %s Ready: %v", name, err)
		}
		return fmt.Sprintf("overflow node %s Ready; status: %+v", name, node.Status)
	})
	return o
}

// stop stops the node the way a killed process stops: nothing is cleaned
// up (the node keeps no state, and no shutdown step exists to skip).
func (o *overflowNode) stop() {
	o.once.Do(func() {
		o.cancel()
		<-o.running.Done()
	})
}

// deleteNodeAtEnd removes the node object and the remote pods of the test.
func deleteNodeAtEnd(t *testing.T, cp *harness.ControlPlane, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		_ = harness.Remote(t).Client.CoreV1().Pods(remoteNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
			metav1.ListOptions{LabelSelector: kube.LabelNode + "=" + name})
	})
}

func kubeProvider(rcp *harness.ControlPlane, name string, priority int32) overflownode.ProviderConfig {
	return overflownode.ProviderConfig{Name: name, Type: overflownode.TypeKubernetes, Priority: priority,
		Kubernetes: &overflownode.KubernetesProvider{Kubeconfig: rcp.Kubeconfig, Namespace: remoteNamespace}}
}

// startScheduler runs sluice-scheduler from the shipped configuration.
func startScheduler(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	harness.StartScheduler(t, cp, harness.LoadShippedConfig(t))
}

// remotePods lists the remote pods of an overflow node.
func remotePods(t *testing.T, rcp *harness.ControlPlane, node string) []v1.Pod {
	t.Helper()
	list, err := rcp.Client.CoreV1().Pods(remoteNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: kube.LabelNode + "=" + node})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// remoteOf is the remote pod running home pod uid: named by the id
// derived from the uid, or a warm instance the pod adopted, it carries the
// uid in its labels.
func remoteOf(ctx context.Context, rcp *harness.ControlPlane, uid types.UID) (*v1.Pod, error) {
	list, err := rcp.Client.CoreV1().Pods(remoteNamespace).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPodUID + "=" + string(uid)})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("%d remote pods run home pod %s, want 1", len(list.Items), uid)
	}
	return &list.Items[0], nil
}

func homePods(t *testing.T, cp *harness.ControlPlane, ns, app string) []v1.Pod {
	t.Helper()
	list, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// describe says where each pod is and how it is doing.
func describe(pods []v1.Pod) string {
	var out []string
	for _, p := range pods {
		s := fmt.Sprintf("%s on %q %s ready=%v", p.Name, p.Spec.NodeName, p.Status.Phase, ready(&p))
		if p.Status.Reason != "" || p.Status.Message != "" {
			s += fmt.Sprintf(" (%s: %s)", p.Status.Reason, p.Status.Message)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status != v1.ConditionTrue {
				s += " unschedulable: " + c.Message
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

func ready(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func nodeReady(t *testing.T, cp *harness.ControlPlane, name string) (bool, resource.Quantity) {
	t.Helper()
	node, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpus := node.Status.Allocatable["nvidia.com/gpu"]
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue, gpus
		}
	}
	return false, gpus
}

// readinessWatch checks, at every change of a home pod on the overflow
// node, that a home pod turns Ready only once its remote pod is Ready:
// when a home pod becomes Ready, its remote pod must be Ready as the
// remote cluster's watch has shown it, or (that watch may lag) as a
// direct read of the remote pod shows it.
type readinessWatch struct {
	violations harness.Violations
	turned     atomic.Int32 // home pods seen turning Ready
}

func watchReadiness(t *testing.T, cp, rcp *harness.ControlPlane, ns, node string) *readinessWatch {
	t.Helper()
	w := &readinessWatch{}
	var mu sync.Mutex
	remoteReady := map[string]bool{}
	harness.WatchPods(t, rcp.Client, remoteNamespace, func(e harness.PodEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.New != nil && ready(e.New) {
			remoteReady[e.New.Labels[kube.LabelPodUID]] = true
		}
	})
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		if e.New == nil || e.New.Spec.NodeName != node || !ready(e.New) || (e.Old != nil && ready(e.Old)) {
			return
		}
		w.turned.Add(1)
		mu.Lock()
		seen := remoteReady[string(e.New.UID)]
		mu.Unlock()
		if seen {
			return
		}
		r, err := remoteOf(context.Background(), rcp, e.New.UID)
		if err != nil || !ready(r) {
			w.violations.Addf("%s turned Ready at home while its remote pod is not Ready (%v)", e.New.Name, err)
		}
	})
	return w
}

func (w *readinessWatch) check(t *testing.T) {
	t.Helper()
	if w.turned.Load() == 0 {
		t.Errorf("readiness watch saw no home pod on the overflow node turn Ready")
	}
	w.violations.Check(t)
}

// TestOverflowedDeploymentRunsRemotely: a node full of production; a
// research pod claims it; sluice evicts production to the overflow node in
// PDB-safe waves; the overflow node runs it on the remote cluster; a home
// pod is Ready only once its remote pod is.
func TestOverflowedDeploymentRunsRemotely(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-remote"
	deleteNodeAtEnd(t, cp, name)
	harness.CreateNodes(t, cp.Client, harness.GPUNode("ovf-remote-gpu", 8).Fabric("l1", "s1", "b1").Obj())
	node := startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	defer node.stop()
	if ok, gpus := nodeReady(t, cp, name); !ok || gpus.Value() != 32 {
		t.Fatalf("overflow node: ready %v with %s GPUs, want Ready with the remote cluster's 32", ok, gpus.String())
	}
	startScheduler(t, cp)
	watch := watchReadiness(t, cp, rcp, ns, name)

	d := harness.InferenceDeployment(ns, "llm", 8, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "llm", intstr.FromInt32(2)))
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "llm")
		n := 0
		for i := range pods {
			if pods[i].Spec.NodeName == "ovf-remote-gpu" && ready(&pods[i]) {
				n++
			}
		}
		return n == 8, nil
	}, func() string { return "8 production replicas Ready on the physical node" })

	harness.CreatePods(t, cp.Client, harness.Pod(ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "llm")
		n := 0
		for i := range pods {
			if pods[i].Spec.NodeName == name && ready(&pods[i]) && pods[i].DeletionTimestamp == nil {
				n++
			}
		}
		return n == 8, nil
	}, func() string { return "8 production replicas Ready on the overflow node" })

	home := homePods(t, cp, ns, "llm")
	remote := remotePods(t, rcp, name)
	if len(remote) != 8 {
		t.Errorf("remote cluster runs %d pods for the overflow node, want 8 (one per replica, no duplicates)", len(remote))
	}
	byUID := map[string]v1.Pod{}
	for _, r := range remote {
		byUID[r.Labels[kube.LabelPodUID]] = r
	}
	for _, p := range home {
		if p.Spec.NodeName != name {
			continue
		}
		r, ok := byUID[string(p.UID)]
		if !ok {
			t.Errorf("home pod %s has no remote pod", p.Name)
			continue
		}
		// Moved by a make-before-break claim: each adopted the warm
		// instance started for its victim.
		if !strings.HasPrefix(r.Name, provider.WarmPrefix) {
			t.Errorf("home pod %s runs as %s, not as an adopted warm instance", p.Name, r.Name)
		}
		if r.Annotations[kube.AnnotationPodNS] != ns || r.Annotations[kube.AnnotationPodNam] != p.Name || r.Labels[kube.LabelPodUID] != string(p.UID) {
			t.Errorf("remote pod %s does not name its home pod %s/%s: %v %v", r.Name, ns, p.Name, r.Labels, r.Annotations)
		}
		if r.Spec.NodeName == "" || !strings.HasPrefix(r.Spec.NodeName, "remote-") {
			t.Errorf("remote pod %s was not scheduled in the remote cluster (node %q)", r.Name, r.Spec.NodeName)
		}
	}
	watch.check(t)
	events := harness.ObjectEvents(t, cp.Client, ns, "Pod", home[0].Name)
	t.Logf("events of %s: %v", home[0].Name, events)
}

// TestRestartMidFlight: the node process dies while pods are starting; a
// pod is deleted while it is down. The restarted process finds the same
// remote workloads (no duplicates), collects the orphan, and statuses
// resume.
func TestRestartMidFlight(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-restart"
	deleteNodeAtEnd(t, cp, name)
	node := startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	startScheduler(t, cp)

	d := harness.InferenceDeployment(ns, "llm", 6, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, nil)
	// Mid-flight: all six dispatched, not yet all Ready.
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return len(remotePods(t, rcp, name)) == 6, nil
	}, func() string {
		node, _ := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return fmt.Sprintf("6 remote pods (have %d); home pods: %s; node: %+v", len(remotePods(t, rcp, name)), describe(homePods(t, cp, ns, "llm")), node.Status.Allocatable)
	})
	node.stop()
	before := map[string]bool{}
	for _, r := range remotePods(t, rcp, name) {
		before[r.Name] = true
	}
	notReady := 0
	for _, p := range homePods(t, cp, ns, "llm") {
		if !ready(&p) {
			notReady++
		}
	}
	t.Logf("node stopped with %d of 6 home pods not yet Ready", notReady)

	// While the node is down, one pod is deleted for good: its remote pod
	// is now an orphan.
	victim := homePods(t, cp, ns, "llm")[0]
	if err := cp.Client.CoreV1().Pods(ns).Delete(context.Background(), victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	orphan := provider.IDFor(victim.UID)
	if !before[orphan] {
		t.Fatalf("victim %s had no remote pod before the restart", victim.Name)
	}

	node = startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	defer node.stop()
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		home := homePods(t, cp, ns, "llm")
		readyN := 0
		for i := range home {
			if ready(&home[i]) && home[i].DeletionTimestamp == nil {
				readyN++
			}
		}
		return readyN == 6 && len(remotePods(t, rcp, name)) == 6, nil
	}, func() string {
		return fmt.Sprintf("6 Ready home pods and 6 remote pods (have %d remote)", len(remotePods(t, rcp, name)))
	})
	after := map[string]bool{}
	for _, r := range remotePods(t, rcp, name) {
		after[r.Name] = true
	}
	if after[orphan] {
		t.Errorf("orphan remote pod %s was not garbage-collected", orphan)
	}
	kept := 0
	for id := range before {
		if after[id] {
			kept++
		}
	}
	if kept != 5 {
		t.Errorf("%d of the 5 surviving remote pods were kept across the restart, want all (same workloads, no re-creation)", kept)
	}
	var ids []string
	for _, p := range homePods(t, cp, ns, "llm") {
		if !after[provider.IDFor(p.UID)] {
			t.Errorf("home pod %s has no remote pod", p.Name)
		}
		ids = append(ids, provider.IDFor(p.UID))
	}
	sort.Strings(ids)
	t.Logf("remote workloads after restart: %v", ids)
}

// TestRemoteDeletedBehindOurBack: a remote pod disappears; its home pod is
// marked Failed with a reason and its ReplicaSet replaces it.
func TestRemoteDeletedBehindOurBack(t *testing.T) {
	cp, rcp := harness.Shared(t), remoteCluster(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-vanish"
	deleteNodeAtEnd(t, cp, name)
	node := startNode(t, cp, name, kubeProvider(rcp, "burst-east", 0))
	defer node.stop()
	startScheduler(t, cp)
	d := harness.InferenceDeployment(ns, "llm", 2, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, nil)
	readyPods := func() []v1.Pod {
		var out []v1.Pod
		for _, p := range homePods(t, cp, ns, "llm") {
			if ready(&p) && p.DeletionTimestamp == nil {
				out = append(out, p)
			}
		}
		return out
	}
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) { return len(readyPods()) == 2, nil },
		func() string { return "2 Ready replicas on the overflow node" })
	victim := readyPods()[0]
	if err := rcp.Client.CoreV1().Pods(remoteNamespace).Delete(context.Background(), provider.IDFor(victim.UID), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil // failed and already cleaned up
		}
		if err != nil {
			return false, err
		}
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == overflownode.ReasonRemoteLost, nil
	}, func() string { return victim.Name + " Failed with reason " + overflownode.ReasonRemoteLost })
	harness.WaitForEvent(t, cp.Client, ns, "Pod", victim.Name, overflownode.ReasonRemoteLost)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := readyPods()
		if len(pods) != 2 {
			return false, nil
		}
		for _, p := range pods {
			if p.UID == victim.UID {
				return false, nil
			}
		}
		return true, nil
	}, func() string { return "the ReplicaSet replaced the failed pod and both replicas are Ready" })
}

// TestProviderDown: the only provider goes down; the node turns NotReady
// and its capacity leaves; sluice's overflow preemption stops choosing
// victims (the research pod waits, production is not evicted); when the
// provider is back, the claim goes ahead and production runs there.
func TestProviderDown(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-down"
	deleteNodeAtEnd(t, cp, name)
	srv := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "16"}, StartDelay: 300 * time.Millisecond})
	defer srv.Close()
	gpuNode := "ovf-down-gpu"
	harness.CreateNodes(t, cp.Client, harness.GPUNode(gpuNode, 8).Fabric("l9", "s9", "b9").Obj())
	node := startNode(t, cp, name, overflownode.ProviderConfig{Name: "gpu-cloud", Type: overflownode.TypeHTTP, HTTP: &overflownode.HTTPProvider{URL: srv.URL}})
	defer node.stop()
	startScheduler(t, cp)

	d := harness.InferenceDeployment(ns, "llm", 8, 1)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "llm", intstr.FromInt32(2)))
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		n := 0
		for _, p := range homePods(t, cp, ns, "llm") {
			if p.Spec.NodeName == gpuNode && ready(&p) {
				n++
			}
		}
		return n == 8, nil
	}, func() string { return "8 replicas Ready on the physical node" })
	original := map[string]bool{}
	for _, p := range homePods(t, cp, ns, "llm") {
		original[string(p.UID)] = true
	}

	srv.SetHealthy(false)
	harness.Eventually(t, 15*time.Second, func(context.Context) (bool, error) {
		node, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, gpus := node.Status.Allocatable[v1.ResourcePods], node.Status.Allocatable["nvidia.com/gpu"]
		return pods.IsZero() && gpus.IsZero(), nil
	}, func() string { return "overflow node takes no pods (no GPUs) while its only provider is down" })

	waits := harness.ExpectNeverBound(t, cp.Client, ns, "train")
	harness.CreatePods(t, cp.Client, harness.Pod(ns, "train").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj())
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train", "NoOverflowClaim")
	for _, p := range homePods(t, cp, ns, "llm") {
		if !original[string(p.UID)] || p.DeletionTimestamp != nil {
			t.Fatalf("production pod %s was evicted while the overflow node had no healthy provider", p.Name)
		}
	}
	if len(srv.IDs()) != 0 {
		t.Errorf("provider received %d workloads while down", len(srv.IDs()))
	}

	waits()
	srv.SetHealthy(true)
	harness.WaitForPodsBound(t, cp.Client, ns, "train")
	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, error) {
		n := 0
		for _, p := range homePods(t, cp, ns, "llm") {
			if p.Spec.NodeName == name && ready(&p) && p.DeletionTimestamp == nil {
				n++
			}
		}
		return n == 8 && len(srv.IDs()) == 8, nil
	}, func() string {
		return fmt.Sprintf("8 replicas Ready on the overflow node via the HTTP provider (provider has %d)", len(srv.IDs()))
	})
}

// TestRoomSplitOverProviders: two providers with 4 GPUs each. The node
// offers 8, but no provider can run an 8-GPU pod: the claim planner reads
// each provider's room from the node (overflow.sluice.dev/providers) and
// evicts nothing for a research pod whose only victim needs 8; 4-GPU
// victims are counted one provider each, and each runs where counted.
func TestRoomSplitOverProviders(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-split"
	deleteNodeAtEnd(t, cp, name)
	east := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "4"}, StartDelay: 200 * time.Millisecond})
	defer east.Close()
	west := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "4"}, StartDelay: 200 * time.Millisecond})
	defer west.Close()
	big, small := "ovf-split-big", "ovf-split-small"
	harness.CreateNodes(t, cp.Client, harness.GPUNode(big, 8).Fabric("l8", "s8", "b8").Obj(), harness.GPUNode(small, 8).Fabric("l7", "s7", "b7").Obj())
	node := startNode(t, cp, name,
		overflownode.ProviderConfig{Name: "east", Type: overflownode.TypeHTTP, Priority: 0, HTTP: &overflownode.HTTPProvider{URL: east.URL}},
		overflownode.ProviderConfig{Name: "west", Type: overflownode.TypeHTTP, Priority: 1, HTTP: &overflownode.HTTPProvider{URL: west.URL}})
	defer node.stop()
	harness.Eventually(t, 20*time.Second, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && strings.Contains(n.Annotations[offer.Annotation], `"west"`), nil
	}, func() string { return "overflow node publishes both providers' room" })
	startScheduler(t, cp)

	pin := func(d *appsv1.Deployment, node string) *appsv1.Deployment {
		d.Spec.Template.Spec.NodeSelector = nil
		d.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{node, name}}}}},
		}}}
		d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		return d
	}
	harness.CreateDeployment(t, cp, pin(harness.InferenceDeployment(ns, "big", 1, 8), big), nil)
	harness.CreateDeployment(t, cp, pin(harness.InferenceDeployment(ns, "small", 2, 4), small), harness.PDB(ns, "small", intstr.FromInt32(1)))
	for app, n := range map[string]int{"big": 1, "small": 2} {
		harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
			ok := 0
			for _, p := range homePods(t, cp, ns, app) {
				if p.Spec.NodeName != "" && p.Spec.NodeName != name && ready(&p) {
					ok++
				}
			}
			return ok == n, nil
		}, func() string { return fmt.Sprintf("%d replicas of %s Ready on a physical node", n, app) })
	}
	bigPod := homePods(t, cp, ns, "big")[0]

	// Only big's node would do for a research pod pinned there.
	waits := harness.ExpectNeverBound(t, cp.Client, ns, "train-big")
	train := harness.Pod(ns, "train-big").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj()
	train.Spec.NodeSelector = map[string]string{v1.LabelHostname: big}
	harness.CreatePods(t, cp.Client, train)
	// No provider is ever big enough for it: it cannot move at all.
	harness.WaitForEvent(t, cp.Client, ns, "Pod", "train-big", "NoOverflowClaim", bigPod.Name, "the pod requests 8 nvidia.com/gpu, more than the provider's 4 in all")
	if now := homePods(t, cp, ns, "big"); len(now) != 1 || now[0].UID != bigPod.UID {
		t.Fatalf("the 8-GPU pod was evicted into 4 + 4 GPUs of room")
	}
	waits()
	harness.DeletePods(t, cp.Client, ns, "train-big")

	// Two 4-GPU victims: one per provider.
	small8 := harness.Pod(ns, "train-small").Scheduler("sluice-research").PriorityClass("research").GPUs(8).Obj()
	small8.Spec.NodeSelector = map[string]string{v1.LabelHostname: small}
	harness.CreatePods(t, cp.Client, small8)
	harness.WaitForPodsBound(t, cp.Client, ns, "train-small")
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return len(east.IDs()) == 1 && len(west.IDs()) == 1, nil
	}, func() string {
		return fmt.Sprintf("one 4-GPU victim on each provider (east %d, west %d)", len(east.IDs()), len(west.IDs()))
	})
}
