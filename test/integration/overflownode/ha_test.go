// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/kcm"
	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
)

// lifecycleControlPlane is a control plane of the test's own with the
// real node lifecycle and taint eviction controllers (and the workload and
// EndpointSlice controllers), the overflow node's RBAC, and one more node
// whose heartbeat the test keeps, so that the overflow node going silent
// is one node of two in its zone, not a zone (a cluster) fully disrupted,
// where the node lifecycle controller stops evicting. The shared control
// plane cannot run these controllers: the node simulator's nodes renew no
// Lease.
func lifecycleControlPlane(t *testing.T) *harness.ControlPlane {
	t.Helper()
	cp := harness.StartOwnControlPlane(t, kcm.Set{Workloads: true, Network: true, NodeLifecycle: true, Cleanup: true})
	applyNodeRBAC(t, cp)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	steady := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "steady"}}
	steady.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	steady.Status.Capacity = v1.ResourceList{v1.ResourcePods: resource.MustParse("10")}
	steady.Status.Allocatable = steady.Status.Capacity
	harness.CreateNodes(t, cp.Client, steady)
	leases := cp.Client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "steady"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("steady"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l, err := leases.Get(ctx, "steady", metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	return cp
}

// leaderLease is where the replicas of node elect their leader (the
// configuration's defaults).
func leaderLease(node string) harness.LeaderElection {
	return harness.LeaderElection{Namespace: overflownode.DefaultLeaseNamespace, Lease: "sluice-overflow-node-" + node}
}

// startReplica runs one replica of the sluice-overflow-node binary with
// cfg (leader election as shipped), with the RBAC applyNodeRBAC applied.
func startReplica(t *testing.T, cp *harness.ControlPlane, cfg *overflownode.Config, replica string) *harness.Process {
	t.Helper()
	return runNodeBinary(t, cp, cfg, replica)
}

// waitLeader waits until a replica leads the node, other than not, and
// its node is Ready; it returns the leader's identity.
func waitLeader(t *testing.T, cp *harness.ControlPlane, node, not string) string {
	t.Helper()
	var holder string
	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, error) {
		holder = harness.LeaseHolder(t, cp, leaderLease(node))
		if holder == "" || holder == not {
			return false, nil
		}
		n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, nil
			}
		}
		return false, nil
	}, func() string {
		return fmt.Sprintf("a replica other than %q leading node %s (holder %q), the node Ready", not, node, holder)
	})
	return holder
}

// nodeLeaseRenewed is when the node's heartbeat Lease was last renewed.
func nodeLeaseRenewed(t *testing.T, cp *harness.ControlPlane, node string) time.Time {
	t.Helper()
	l, err := cp.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// haConfig is an overflow node on the remote cluster's provider, with
// leader election as shipped (15 s lease).
func haConfig(t *testing.T, rcp *harness.ControlPlane, node string) *overflownode.Config {
	t.Helper()
	cfg := &overflownode.Config{APIVersion: overflownode.APIVersion, Kind: overflownode.Kind, NodeName: node,
		Providers:                     []overflownode.ProviderConfig{kubeProvider(rcp, "burst", 0)},
		ReconcileIntervalSeconds:      ptr.To[int64](1),
		RequestTimeoutSeconds:         ptr.To[int64](3),
		ProviderFailureTimeoutSeconds: ptr.To[int64](30),
	}
	cfg.Default()
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("overflow node config: %v", errs.ToAggregate())
	}
	return cfg
}

// servingPod is a production pod bound to node (a GPU, a port, a
// Service's label), tolerating the node's unreachable taint for
// tolerationSeconds (nil: the apiserver's default, 300 s).
func servingPod(ns, app, node string, tolerationSeconds *int64) *v1.Pod {
	p := harness.Pod(ns, "").TolerateOverflow().GPUs(1).Label("app", app).OnNode(node).Obj()
	p.Spec.SchedulerName = ""
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
	if tolerationSeconds != nil {
		for _, key := range []string{v1.TaintNodeUnreachable, v1.TaintNodeNotReady} {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: v1.TolerationOpExists,
				Effect: v1.TaintEffectNoExecute, TolerationSeconds: tolerationSeconds})
		}
	}
	return p
}

// service is a Service over app's pods.
func service(t *testing.T, cp *harness.ControlPlane, ns, app string) {
	t.Helper()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: v1.ProtocolTCP}}}}
	if _, err := cp.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Ways production on the overflow node stops serving, as servingWatch
// sees them.
const (
	podDeleted       = "pod deleted"
	podNotReady      = "pod turned not Ready"
	endpointNotReady = "endpoint turned not ready"
	nodeNotReady     = "node not Ready"
	nodeTainted      = "node tainted by the node lifecycle controller"
)

// servingWatch follows, continuously, what production on an overflow node
// needs to go on serving: its pods (none deleted, none turning not Ready),
// their Service's endpoints (none turning not ready once ready) and the
// node (Ready, without the node lifecycle controller's taints). It records
// when each first broke, and how.
type servingWatch struct {
	mu    sync.Mutex
	first map[string]time.Time
	how   []string
	// ready endpoints by EndpointSlice and address.
	ready map[string]bool
}

func watchServing(t *testing.T, cp *harness.ControlPlane, ns, app, node string) *servingWatch {
	t.Helper()
	w := &servingWatch{first: map[string]time.Time{}, ready: map[string]bool{}}
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		switch {
		case e.New == nil || e.New.DeletionTimestamp != nil:
			w.saw(podDeleted, "%s deleted", e.Pod().Name)
		case e.Old != nil && ready(e.Old) && !ready(e.New):
			w.saw(podNotReady, "%s turned not Ready", e.New.Name)
		}
	})
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	onSlice := func(old, cur *discoveryv1.EndpointSlice) {
		if cur != nil && cur.Labels[discoveryv1.LabelServiceName] != app || old != nil && old.Labels[discoveryv1.LabelServiceName] != app {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		name := ""
		now := map[string]bool{}
		if cur != nil {
			name = cur.Name
			for _, ep := range cur.Endpoints {
				for _, a := range ep.Addresses {
					now[a] = ptr.Deref(ep.Conditions.Ready, false)
				}
			}
		} else {
			name = old.Name
		}
		for key, was := range w.ready {
			slice, addr, _ := strings.Cut(key, "/")
			if slice == name && was && !now[addr] {
				w.sawLocked(endpointNotReady, "%s turned not ready (or left) in EndpointSlice %s", addr, name)
			}
		}
		for key := range w.ready {
			if slice, _, _ := strings.Cut(key, "/"); slice == name {
				delete(w.ready, key)
			}
		}
		for addr, r := range now {
			w.ready[name+"/"+addr] = r
		}
	}
	if _, err := sliceInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onSlice(nil, obj.(*discoveryv1.EndpointSlice)) },
		UpdateFunc: func(old, cur any) { onSlice(old.(*discoveryv1.EndpointSlice), cur.(*discoveryv1.EndpointSlice)) },
		DeleteFunc: func(obj any) {
			if es, ok := obj.(*discoveryv1.EndpointSlice); ok {
				onSlice(es, nil)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	nodes := factory.Core().V1().Nodes().Informer()
	onNode := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok || n.Name != node {
			return
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status != v1.ConditionTrue {
				w.saw(nodeNotReady, "node Ready=%s (%s)", c.Status, c.Reason)
			}
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1.TaintNodeUnreachable || taint.Key == v1.TaintNodeNotReady {
				w.saw(nodeTainted, "node tainted %s:%s", taint.Key, taint.Effect)
			}
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onNode, UpdateFunc: func(_, cur any) { onNode(cur) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *servingWatch) saw(kind, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sawLocked(kind, format, args...)
}

func (w *servingWatch) sawLocked(kind, format string, args ...any) {
	at := time.Now()
	if _, ok := w.first[kind]; !ok {
		w.first[kind] = at
	}
	if len(w.how) < 20 {
		w.how = append(w.how, at.Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
	}
}

// broke reports whether anything broke.
func (w *servingWatch) broke() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.first) > 0
}

// firstTime is when kind first happened (zero: never).
func (w *servingWatch) firstTime(kind string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[kind]
}

func (w *servingWatch) readyEndpoints() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.ready {
		if r {
			n++
		}
	}
	return n
}

func (w *servingWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	kinds := make([]string, 0, len(w.first))
	for k := range w.first {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return fmt.Sprintf("broke: %v; %s", kinds, strings.Join(w.how, "; "))
}

// TestStandbyTakesOverTheNode: two replicas of the real binary serve one
// overflow node, with the real node lifecycle and taint eviction
// controllers running. The leader is killed (SIGKILL) while a Deployment's
// pods run on the node behind a Service; the standby takes the node over.
// Watched continuously until the node's heartbeat has been kept for longer
// than the node monitor grace period after the kill: no pod deleted or
// turned not Ready, no endpoint turned not ready, the node never NotReady
// or tainted, the remote workloads the same ones (adopted, not restarted);
// the new leader runs a pod added after the takeover.
func TestStandbyTakesOverTheNode(t *testing.T) {
	cp := lifecycleControlPlane(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-ha-" + harness.NewNameSuffix()
	deleteNodeAtEnd(t, cp, name)
	rcp := remoteCluster(t)
	cfg := haConfig(t, rcp, name)

	first := startReplica(t, cp, cfg, name+"-a")
	leader := waitLeader(t, cp, name, "")
	second := startReplica(t, cp, cfg, name+"-b")

	const replicas = 4
	template := servingPod(ns, "web", name, nil)
	d := harness.InferenceDeployment(ns, "web", replicas, 1)
	d.Spec.Template.Spec = template.Spec
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "web", intstr.FromInt32(1)))
	service(t, cp, ns, "web")
	w := watchServing(t, cp, ns, "web", name)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		pods := homePods(t, cp, ns, "web")
		n := 0
		for i := range pods {
			if ready(&pods[i]) {
				n++
			}
		}
		return n == replicas && w.readyEndpoints() == replicas, nil
	}, func() string {
		return fmt.Sprintf("%d pods Ready on %s and endpoints: %s; %d ready endpoints", replicas, name, describe(homePods(t, cp, ns, "web")), w.readyEndpoints())
	})
	remoteBefore := remoteNames(t, rcp, name)

	killed := time.Now()
	first.Kill()
	var takeover time.Duration
	var standby string
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		standby = harness.LeaseHolder(t, cp, leaderLease(name))
		if standby == "" || standby == leader || !nodeLeaseRenewed(t, cp, name).After(killed) {
			return false, nil
		}
		takeover = time.Since(killed)
		return true, nil
	}, func() string {
		return fmt.Sprintf("the standby leading (holder %q, killed %q) and the node's Lease renewed since the kill (at %v)", standby, leader, nodeLeaseRenewed(t, cp, name))
	})
	t.Logf("takeover: %.1f s from SIGKILL of the leader to the standby holding the leader Lease with the node's Lease renewed", takeover.Seconds())

	// The new leader runs the node: a pod added now starts.
	if _, err := cp.Client.AppsV1().Deployments(ns).Patch(context.Background(), "web", "application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas+1)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until the node lifecycle controller would have acted on a lapsed
	// heartbeat: the node's Lease renewed more than the grace period (and
	// a monitor period) after the kill.
	horizon := killed.Add(kcm.NodeMonitorGracePeriod + 10*time.Second)
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, error) {
		if !nodeLeaseRenewed(t, cp, name).After(horizon) {
			return false, nil
		}
		return w.readyEndpoints() == replicas+1, nil
	}, func() string {
		return fmt.Sprintf("the node's Lease renewed after %v (last %v) and %d ready endpoints (%d): %s", horizon.Format("15:04:05"),
			nodeLeaseRenewed(t, cp, name).Format("15:04:05"), replicas+1, w.readyEndpoints(), describe(homePods(t, cp, ns, "web")))
	})
	if w.broke() {
		t.Errorf("production on the overflow node stopped serving across the takeover: %v", w)
	}

	// A rolling update: a third replica stands by, the leader gets
	// SIGTERM, stops its node, then hands the Lease over.
	third := startReplica(t, cp, cfg, name+"-c")
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		data, err := os.ReadFile(third.Log)
		return err == nil && strings.Contains(string(data), "Standing by"), nil
	}, func() string { return "the third replica standing by" })
	terminated := time.Now()
	second.Terminate()
	var next string
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		next = harness.LeaseHolder(t, cp, leaderLease(name))
		return next != "" && next != standby && nodeLeaseRenewed(t, cp, name).After(terminated), nil
	}, func() string { return fmt.Sprintf("the third replica leading (holder %q)", next) })
	t.Logf("handover on SIGTERM: %.1f s to the next replica leading with the node's Lease renewed", time.Since(terminated).Seconds())
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return w.readyEndpoints() == replicas+1, nil
	}, func() string { return fmt.Sprintf("%d ready endpoints (%d)", replicas+1, w.readyEndpoints()) })
	if w.broke() {
		t.Errorf("production on the overflow node stopped serving across the handover: %v", w)
	}
	after := remoteNames(t, rcp, name)
	for _, r := range remoteBefore {
		if !slices.Contains(after, r) {
			t.Errorf("remote workload %s of a pod that lived through the takeover is gone (before %v, after %v): the new leader restarted it", r, remoteBefore, after)
		}
	}
}

// remoteNames are the names of node's remote pods.
func remoteNames(t *testing.T, rcp *harness.ControlPlane, node string) []string {
	t.Helper()
	var out []string
	for _, p := range remotePods(t, rcp, node) {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// TestEveryReplicaDown shows what the README says happens when every
// replica of an overflow node is down past its pods' toleration: the node
// lifecycle controller marks the node Unknown once its heartbeat is older
// than the grace period (50 s) and taints it unreachable:NoExecute, its
// pods turn not Ready and leave their Service's ready endpoints although
// their remote workloads still run, and once their toleration of the taint
// ends (here 20 s; 300 s by default) the taint eviction controller deletes
// them, PodDisruptionBudget not consulted. They stay Terminating (no
// replica completes their deletion) while their remote workloads go on
// running; a replica that comes back ends both.
func TestEveryReplicaDown(t *testing.T) {
	cp := lifecycleControlPlane(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-down-" + harness.NewNameSuffix()
	deleteNodeAtEnd(t, cp, name)
	rcp := remoteCluster(t)
	cfg := haConfig(t, rcp, name)

	only := startReplica(t, cp, cfg, name+"-a")
	waitLeader(t, cp, name, "")
	const toleration = 20
	var pods []*v1.Pod
	for i := range 2 {
		p := servingPod(ns, "web", name, ptr.To[int64](toleration))
		p.Name = fmt.Sprintf("web-%d", i)
		pods = append(pods, p)
	}
	harness.CreatePods(t, cp.Client, pods...)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	service(t, cp, ns, "web")
	w := watchServing(t, cp, ns, "web", name)
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return w.readyEndpoints() == 2, nil
	}, func() string {
		return fmt.Sprintf("2 ready endpoints (%d): %s", w.readyEndpoints(), describe(homePods(t, cp, ns, "web")))
	})
	if len(remotePods(t, rcp, name)) != 2 {
		t.Fatalf("remote pods of %s: %d, want 2", name, len(remotePods(t, rcp, name)))
	}

	lastBeat := nodeLeaseRenewed(t, cp, name)
	only.Kill()
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, error) {
		for _, p := range homePods(t, cp, ns, "web") {
			if p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	}, func() string {
		return fmt.Sprintf("the pods deleted by the taint eviction controller: %s; %v", describe(homePods(t, cp, ns, "web")), w)
	})
	since := func(kind string) time.Duration {
		at := w.firstTime(kind)
		if at.IsZero() {
			t.Errorf("%s: never seen; %v", kind, w)
		}
		return at.Sub(lastBeat)
	}
	notReady, tainted, endpoints, deleted := since(nodeNotReady), since(nodeTainted), since(endpointNotReady), since(podDeleted)
	t.Logf("every replica down: after the last heartbeat, node Unknown at %.0f s, tainted at %.0f s, endpoints not ready at %.0f s, pods deleted at %.0f s (toleration %d s)",
		notReady.Seconds(), tainted.Seconds(), endpoints.Seconds(), deleted.Seconds(), toleration)
	if notReady < kcm.NodeMonitorGracePeriod-time.Second {
		t.Errorf("node Unknown %v after its last heartbeat, before the grace period %v", notReady, kcm.NodeMonitorGracePeriod)
	}
	if deleted < tainted+toleration*time.Second-time.Second {
		t.Errorf("pods deleted %v after the last heartbeat, before their toleration (%d s) of the taint (at %v) ended", deleted, toleration, tainted)
	}
	if got := len(homePods(t, cp, ns, "web")); got != 2 {
		t.Errorf("pods while no replica runs: %d, want both still Terminating", got)
	}
	if got := len(remotePods(t, rcp, name)); got != 2 {
		t.Errorf("remote pods while no replica runs: %d, want both still running (nothing removes them)", got)
	}

	// A replica back: the node Ready again, the deletions completed and
	// the remote workloads gone.
	startReplica(t, cp, cfg, name+"-b")
	waitLeader(t, cp, name, "")
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return len(homePods(t, cp, ns, "web")) == 0 && len(remotePods(t, rcp, name)) == 0, nil
	}, func() string {
		return fmt.Sprintf("the deleted pods gone (%s) and their remote workloads (%v)", describe(homePods(t, cp, ns, "web")), remoteNames(t, rcp, name))
	})
}
