// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflowpreemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/claims"
	"github.com/sluice-sched/sluice/pkg/disruption"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/requeue"
)

// handle is the scheduler's handle as PostFilter uses it: the snapshot,
// the informers, the event recorder.
type handle struct {
	fwk.Handle
	snapshot  *cache.Snapshot
	informers informers.SharedInformerFactory
	recorder  *events.FakeRecorder
}

func (h handle) SnapshotSharedLister() fwk.SharedLister                 { return h.snapshot }
func (h handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }
func (h handle) EventRecorder() events.EventRecorderLogger              { return h.recorder }

// sealedRuntime is the scheduler runtime, sealed with these pieces.
type sealedRuntime struct {
	tracker *fabric.Tracker
	classes *overflow.Classes
	store   *claims.Store
	ledger  *disruption.Ledger
}

func (r *sealedRuntime) Declare(context.Context, fwk.Handle, *field.Path, config.Facts) error {
	return nil
}
func (r *sealedRuntime) Seal() error { return nil }
func (r *sealedRuntime) Fabric() (*fabric.Tracker, *config.FabricConfig) {
	return r.tracker, &config.FabricConfig{GPUResourceName: "nvidia.com/gpu", DefaultLevel: "any", DefaultMode: config.FabricModePreferred}
}
func (r *sealedRuntime) Classes() *overflow.Classes  { return r.classes }
func (r *sealedRuntime) Gangs() *gang.Gangs          { return nil }
func (r *sealedRuntime) External() capacity.External { return nil }
func (r *sealedRuntime) RunClaims(fwk.Handle)        {}
func (r *sealedRuntime) Claims() *claims.Store       { return r.store }
func (r *sealedRuntime) Ledger() *disruption.Ledger  { return r.ledger }
func (r *sealedRuntime) ClaimsConfig() config.ClaimsConfig {
	return config.ClaimsConfig{WaveTimeoutSeconds: 300, ReplacementTimeoutSeconds: 120, RetryBackoffSeconds: 30}
}

// rig is the plugin over two 8-GPU nodes, each full of production (four
// 2-GPU replicas of one ReplicaSet, no PodDisruptionBudget), and an
// overflow node with overflowGPUs.
type rig struct {
	pl       *OverflowPreemption
	dyn      *dynamicfake.FakeDynamicClient
	store    *claims.Store
	recorder *events.FakeRecorder
}

func newRig(t *testing.T, overflowGPUs int) *rig {
	t.Helper()
	client := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(client, 0)
	var nodes []*v1.Node
	var pods []*v1.Pod
	for _, name := range []string{"n0", "n1"} {
		n := st.MakeNode().Name(name).Label("leaf", "l0").Capacity(map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}).Obj()
		nodes = append(nodes, n)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "serve-" + name, UID: types.UID("rs-" + name)}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4)}}
		if err := inf.Apps().V1().ReplicaSets().Informer().GetStore().Add(rs); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			p := st.MakePod().Name(fmt.Sprintf("serve-%s-%d", name, i)).Namespace("prod").UID(fmt.Sprintf("serve-%s-%d", name, i)).Node(name).
				Req(map[v1.ResourceName]string{"nvidia.com/gpu": "2"}).
				OwnerReference(rs.Name, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}).Obj()
			p.OwnerReferences[0].Controller, p.OwnerReferences[0].UID = ptr.To(true), rs.UID
			p.Spec.PriorityClassName = "production"
			p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			if err := inf.Core().V1().Pods().Informer().GetStore().Add(p); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		}
	}
	vk := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{"pods": "1000", "nvidia.com/gpu": fmt.Sprint(overflowGPUs)}).Obj()
	vk.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	nodes = append(nodes, vk)
	for _, n := range nodes {
		if err := inf.Core().V1().Nodes().Informer().GetStore().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	source, err := fabric.NewLabelSource([]string{"leaf"}, []string{"leaf"})
	if err != nil {
		t.Fatal(err)
	}
	tracker, err := fabric.NewTracker(source, inf.Core().V1().Nodes().Informer())
	if err != nil {
		t.Fatal(err)
	}
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(100)
	ledger, err := disruption.NewLedger(inf, intstr.FromString("100%"), client, recorder)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{recorder: recorder}
	r.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{v1alpha1.Resource: "ResearchClaimList"})
	disco := fake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{
		GroupVersion: v1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: v1alpha1.Resource.Resource, Namespaced: true, Kind: v1alpha1.Kind}},
	}}
	r.store = claims.NewStore(t.Context(), r.dyn, disco)
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return r.store.Served(), nil
	}); err != nil {
		t.Fatalf("the claim store never synced: %v", err)
	}
	h := handle{snapshot: cache.NewSnapshot(pods, nodes), informers: inf, recorder: recorder}
	rt := &sealedRuntime{tracker: tracker, classes: classes, store: r.store, ledger: ledger}
	r.pl = &OverflowPreemption{rt: rt, handle: h, waiting: requeue.NewWaiting(nil)}
	return r
}

func research(name string, gpus int) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("research").UID(name).Req(map[v1.ResourceName]string{"nvidia.com/gpu": fmt.Sprint(gpus)}).Obj()
	p.Spec.PriorityClassName = "research"
	return p
}

// claimsIn lists the claims recorded in the fake apiserver.
func (r *rig) claimsIn(t *testing.T) []*v1alpha1.ResearchClaim {
	t.Helper()
	list, err := r.dyn.Resource(v1alpha1.Resource).Namespace(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1alpha1.ResearchClaim
	for i := range list.Items {
		c, err := v1alpha1.FromUnstructured(list.Items[i].Object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func (r *rig) events(reason string) []string {
	var out []string
	for {
		select {
		case e := <-r.recorder.Events:
			if strings.Contains(e, reason) {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

func TestPostFilter(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		overflow int
		// existing is a claim already recorded for the pod.
		existing func(c *v1alpha1.ResearchClaim)
		// wantCode and wantMessage are the status; wantNode the
		// nomination ("" none; "-" a nomination cleared).
		wantCode    fwk.Code
		wantMessage string
		wantNode    string
		// wantClaim: a claim is recorded, with this many victims and
		// attempts.
		wantClaim    bool
		wantVictims  int
		wantAttempts string
		wantEvent    string
	}{{
		name: "production never claims", pod: func() *v1.Pod { p := research("serve", 8); p.Spec.PriorityClassName = "production"; return p }(), overflow: 64,
		wantCode: fwk.Unschedulable, wantMessage: ReasonNotResearch,
	}, {
		name: "a research pod claims a node; its production moves", pod: research("train", 8), overflow: 64,
		wantCode: fwk.Success, wantNode: "n0", wantClaim: true, wantVictims: 4, wantAttempts: "0", wantEvent: ReasonClaiming,
	}, {
		name: "no overflow room: no claim, and the pod's nomination goes", overflow: 4,
		pod:      func() *v1.Pod { p := research("train", 8); p.Status.NominatedNodeName = "n1"; return p }(),
		wantCode: fwk.Unschedulable, wantMessage: ReasonNoClaim, wantNode: "-", wantEvent: ReasonNoClaim,
	}, {
		name: "a live claim is used as it is", pod: research("train", 8), overflow: 64,
		existing: func(c *v1alpha1.ResearchClaim) {},
		wantCode: fwk.Success, wantNode: "n1", wantClaim: true, wantVictims: 1,
	}, {
		name: "a claim given up blocks new plans until its backoff ends", pod: research("train", 8), overflow: 64,
		existing: func(c *v1alpha1.ResearchClaim) {
			c.Status.Phase, c.Status.RetryAfter, c.Status.Message = v1alpha1.PhaseGivenUp, &metav1.Time{Time: time.Now().Add(time.Hour)}, "gave up"
		},
		wantCode: fwk.Unschedulable, wantMessage: "no new claim before", wantClaim: true, wantVictims: 1,
	}, {
		name: "after its backoff, a claim given up makes way for a new plan, its attempts counted", pod: research("train", 8), overflow: 64,
		existing: func(c *v1alpha1.ResearchClaim) {
			c.Status.Phase, c.Status.RetryAfter, c.Status.Attempts = v1alpha1.PhaseGivenUp, &metav1.Time{Time: time.Now().Add(-time.Second)}, 2
		},
		wantCode: fwk.Success, wantNode: "n0", wantClaim: true, wantVictims: 4, wantAttempts: "2",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.overflow)
			ctx := t.Context()
			if tc.existing != nil {
				c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: claims.NameOf("research/" + tc.pod.Name)}}
				c.Spec = v1alpha1.ResearchClaimSpec{Key: "research/" + tc.pod.Name, Domain: "l0", TimeoutSeconds: 300,
					Claimants: []v1alpha1.Claimant{{Name: tc.pod.Name, UID: tc.pod.UID, Node: "n1"}},
					Victims:   []v1alpha1.Victim{{Namespace: "prod", Name: "serve-n1-0", UID: "serve-n1-0", Node: "n1", Target: v1alpha1.Target{Node: "vk"}}}}
				// One write with the status (the fake keeps it on create):
				// a create and a status update would be two watch events,
				// the older able to arrive after the store showed the newer.
				tc.existing(c)
				created, err := r.store.Create(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					got, ok := r.store.Get(created.Namespace, created.Name)
					return ok && got.Status.Phase == c.Status.Phase && got.Status.Attempts == c.Status.Attempts, nil
				}); err != nil {
					t.Fatalf("the store never showed the claim's status: %v", err)
				}
			}
			res, status := r.pl.PostFilter(ctx, framework.NewCycleState(), tc.pod, nil)
			if status.Code() != tc.wantCode || !strings.Contains(status.Message(), tc.wantMessage) {
				t.Errorf("status %v %q, want %v containing %q", status.Code(), status.Message(), tc.wantCode, tc.wantMessage)
			}
			gotNode := ""
			if res != nil && res.NominatingInfo != nil {
				gotNode = res.NominatedNodeName
				if gotNode == "" {
					gotNode = "-"
				}
			}
			if gotNode != tc.wantNode {
				t.Errorf("nominated %q, want %q", gotNode, tc.wantNode)
			}
			got := r.claimsIn(t)
			if !tc.wantClaim {
				if len(got) != 0 {
					t.Errorf("%d claims recorded, want none", len(got))
				}
			} else {
				if len(got) != 1 {
					t.Fatalf("%d claims recorded, want 1", len(got))
				}
				if len(got[0].Spec.Victims) != tc.wantVictims {
					t.Errorf("claim of %d victims, want %d", len(got[0].Spec.Victims), tc.wantVictims)
				}
				if tc.wantAttempts != "" && got[0].Annotations[claims.AttemptsAnnotation] != tc.wantAttempts {
					t.Errorf("attempts %q, want %q", got[0].Annotations[claims.AttemptsAnnotation], tc.wantAttempts)
				}
			}
			if tc.wantEvent != "" && len(r.events(tc.wantEvent)) == 0 {
				t.Errorf("no %s Event", tc.wantEvent)
			}
		})
	}
}
