// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflow tests research claiming the cluster and production
// overflowing to the virtual-kubelet node and coming back, end to end: a
// real apiserver, the real scheduler (both profiles), the real ReplicaSet,
// Deployment and disruption controllers, and a node simulator that marks
// bound pods Running and Ready (on physical and overflow nodes alike).
package overflow

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/nodesim"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
	"github.com/sluice-sched/sluice/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m,
		harness.WithCRDs("manifests/crds/scheduling.x-k8s.io_podgroups.yaml", "manifests/crds/claims.sluice.dev_researchclaims.yaml"),
		harness.WithPriorityClasses(),
		harness.WithControllers(),
		// Containers take a moment to start, so waves are visible.
		harness.WithNodeSimulator(nodesim.Options{StartupDelay: 300 * time.Millisecond, Workers: 8}))
}

// cluster creates spines x leaves x nodes GPU nodes with 8 GPUs and one
// overflow node with room for overflowGPUs GPUs (Ready unless notReady).
func cluster(t *testing.T, cp *harness.ControlPlane, prefix string, spines, leaves, perLeaf int, overflowGPUs int, notReady bool) []string {
	t.Helper()
	var nodes []*v1.Node
	var names []string
	for s := 0; s < spines; s++ {
		for l := 0; l < leaves; l++ {
			for n := 0; n < perLeaf; n++ {
				name := fmt.Sprintf("%s-s%dl%dn%d", prefix, s, l, n)
				names = append(names, name)
				nodes = append(nodes, harness.GPUNode(name, 8).Fabric(fmt.Sprintf("%s-s%dl%d", prefix, s, l), fmt.Sprintf("%s-s%d", prefix, s), prefix).Obj())
			}
		}
	}
	vk := harness.OverflowNode(prefix+"-overflow", overflowGPUs)
	if notReady {
		vk = vk.NotReady()
	}
	nodes = append(nodes, vk.Obj())
	harness.CreateNodes(t, cp.Client, nodes...)
	return names
}

// startScheduler runs the shipped configuration with a quick return
// controller (hysteresis in seconds).
func startScheduler(t *testing.T, cp *harness.ControlPlane, hysteresis int64) {
	t.Helper()
	startSchedulerWith(t, cp, hysteresis, &configv1.ClaimsConfig{WaveTimeoutSeconds: ptr.To[int64](180)})
}

// startSchedulerWith also sets the claim engine's args.
func startSchedulerWith(t *testing.T, cp *harness.ControlPlane, hysteresis int64, claims *configv1.ClaimsConfig) {
	t.Helper()
	harness.StartScheduler(t, cp, schedulerConfig(t, hysteresis, claims))
}

func schedulerConfig(t *testing.T, hysteresis int64, claims *configv1.ClaimsConfig) *harness.SchedulerConfig {
	t.Helper()
	cfg := harness.LoadShippedConfig(t)
	// The shipped overflow block (classes, tenancy policy) stays.
	args := &configv1.OverflowPreemptionArgs{}
	harness.PluginArgs(t, cfg, "sluice-research", "OverflowPreemption", args)
	args.Claims = claims
	args.Return = &configv1.ReturnConfig{
		HysteresisSeconds:      ptr.To(hysteresis),
		MaxPodsPerWave:         ptr.To[int32](64),
		MinWaveIntervalSeconds: ptr.To[int64](0),
		PollIntervalSeconds:    ptr.To[int64](1),
	}
	harness.SetPluginArgs(t, cfg, "sluice-research", "OverflowPreemption", args)
	return cfg
}

// budgetWatch records, for the whole test, the most unavailable replicas
// each Deployment ever had, to check PodDisruptionBudgets were never
// exceeded.
type budgetWatch struct {
	mu      sync.Mutex
	desired map[string]int
	allowed map[string]int
	worst   map[string]int
	ready   map[string]map[string]bool // app -> pod -> ready
	cancel  context.CancelFunc
}

// watchBudgets starts recording; apps maps Deployment name to its
// replicas and maxUnavailable.
func watchBudgets(t *testing.T, cp *harness.ControlPlane, ns string, apps map[string]struct {
	replicas       int
	maxUnavailable intstr.IntOrString
}) *budgetWatch {
	t.Helper()
	w := &budgetWatch{desired: map[string]int{}, allowed: map[string]int{}, worst: map[string]int{}, ready: map[string]map[string]bool{}}
	for app, a := range apps {
		w.desired[app] = a.replicas
		allowed, err := intstr.GetScaledValueFromIntOrPercent(&a.maxUnavailable, a.replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		w.allowed[app] = allowed
		w.ready[app] = map[string]bool{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	update := func(obj any, deleted bool) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				pod, _ = tomb.Obj.(*v1.Pod)
			}
		}
		if pod == nil {
			return
		}
		app := pod.Labels["app"]
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, tracked := w.ready[app]; !tracked {
			return
		}
		ready := !deleted && pod.DeletionTimestamp == nil && isReady(pod)
		if ready {
			w.ready[app][pod.Name] = true
		} else {
			delete(w.ready[app], pod.Name)
		}
		if un := w.desired[app] - len(w.ready[app]); un > w.worst[app] {
			w.worst[app] = un
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { update(obj, false) },
		UpdateFunc: func(_, obj any) { update(obj, false) },
		DeleteFunc: func(obj any) { update(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	// Wait until the handler has seen every existing pod, not only until
	// the store is filled.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("pod watch did not sync")
	}
	// Only count from a state where everything is Ready.
	w.mu.Lock()
	for app := range w.worst {
		w.worst[app] = 0
	}
	w.mu.Unlock()
	t.Cleanup(cancel)
	return w
}

// check fails the test for every Deployment whose unavailable replicas ever
// exceeded its budget.
func (w *budgetWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for app, worst := range w.worst {
		if worst > w.allowed[app] {
			t.Errorf("Deployment %s had %d replicas unavailable, its PDB allows %d", app, worst, w.allowed[app])
		} else {
			t.Logf("Deployment %s: at most %d unavailable (PDB allows %d)", app, worst, w.allowed[app])
		}
	}
}

func isReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// podsOf lists the pods of app=name.
func podsOf(t *testing.T, cp *harness.ControlPlane, ns, app string) []v1.Pod {
	t.Helper()
	list, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitDeploymentReady waits until a Deployment has all replicas Ready and
// every pod satisfies where(node).
func waitPlaced(t *testing.T, cp *harness.ControlPlane, ns, app string, replicas int, where func(node string) bool, what string) {
	t.Helper()
	var summary string
	harness.Eventually(t, 3*harness.DefaultTimeout, func(context.Context) (bool, error) {
		pods := podsOf(t, cp, ns, app)
		ok := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && isReady(&p) && where(p.Spec.NodeName) {
				ok++
			}
		}
		summary = fmt.Sprintf("%d of %d replicas Ready %s (%d pods)", ok, replicas, what, len(pods))
		return ok == replicas && len(pods) == replicas, nil
	}, func() string { return "Deployment " + app + ": " + summary })
}

// deployment is a test Deployment with its budget.
type deployment struct {
	name           string
	replicas       int
	gpus           int
	maxUnavailable intstr.IntOrString
}

func createDeployments(t *testing.T, cp *harness.ControlPlane, ns string, ds []deployment) {
	t.Helper()
	for _, d := range ds {
		harness.CreateDeployment(t, cp, harness.InferenceDeployment(ns, d.name, int32(d.replicas), d.gpus), harness.PDB(ns, d.name, d.maxUnavailable))
	}
}

func budgets(ds []deployment) map[string]struct {
	replicas       int
	maxUnavailable intstr.IntOrString
} {
	out := map[string]struct {
		replicas       int
		maxUnavailable intstr.IntOrString
	}{}
	for _, d := range ds {
		out[d.name] = struct {
			replicas       int
			maxUnavailable intstr.IntOrString
		}{d.replicas, d.maxUnavailable}
	}
	return out
}
