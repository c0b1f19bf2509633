// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package plan

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
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
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// budgets gives every pod a default budget of its ReplicaSet, but those
// in blocked, which may not move (why).
type budgets map[string]string

func (b budgets) Of(pod *v1.Pod) (disruption.Budget, string) {
	if why, ok := b[pod.Name]; ok {
		return disruption.Budget{}, why
	}
	owner, why := disruption.OwnerOf(pod)
	if why != "" {
		return disruption.Budget{}, why
	}
	return disruption.Budget{Name: "default/" + pod.Namespace + "/ReplicaSet/" + owner.Name, Owner: owner, Namespace: pod.Namespace, Capacity: 1}, ""
}

// holdings are live claims' nodes and room.
type holdings struct {
	claimed      sets.Set[string]
	reservations []overflow.Reservation
}

func (h holdings) NodeClaimed(node string) bool { return h.claimed.Has(node) }

// ledger is budgets, and the room holdings reserve: the disruption
// ledger's two answers the planner asks for.
type ledger struct {
	budgets
	held []overflow.Reservation
}

func (l ledger) Room(counted *overflow.Ledger) *overflow.Ledger { return counted.Holding(l.held) }

// production is a 2-GPU replica of ReplicaSet rs on node, overflow-eligible.
func production(name, rs, node string, gpus int) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("prod").UID(name).Node(node).
		Req(map[v1.ResourceName]string{gpu: fmt.Sprint(gpus), v1.ResourceCPU: "1"}).
		OwnerReference(rs, appsRS).Obj()
	p.OwnerReferences[0].Controller = ptr.To(true)
	p.OwnerReferences[0].UID = types.UID("rs-" + rs)
	p.Labels = map[string]string{"pod-template-hash": "abc"}
	p.Spec.PriorityClassName = "production"
	p.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
	return p
}

var appsRS = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func research(name string, gpus int) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("research").UID(name).Req(map[v1.ResourceName]string{gpu: fmt.Sprint(gpus)}).Obj()
	p.Spec.PriorityClassName = "research"
	return p
}

// cluster is 2 leaves of 2 nodes of 8 GPUs (l0n0, l0n1, l1n0, l1n1) and
// an overflow node vk with overflowGPUs, each physical node full of
// production: 4 replicas of 2 GPUs, one ReplicaSet a node.
type cluster struct {
	tree  *fabric.Tree
	nodes []*v1.Node
	pods  []*v1.Pod
}

func newCluster(t *testing.T, overflowGPUs int) *cluster {
	t.Helper()
	c := &cluster{}
	var fnodes []fabric.Node
	for l := range 2 {
		for n := range 2 {
			name := fmt.Sprintf("l%dn%d", l, n)
			fnodes = append(fnodes, fabric.Node{Name: name, Switches: []string{fmt.Sprintf("l%d", l)}})
			c.nodes = append(c.nodes, st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{"cpu": "64", "memory": "256Gi", "pods": "110", gpu: "8"}).Obj())
			for i := range 4 {
				c.pods = append(c.pods, production(fmt.Sprintf("serve-%s-%d", name, i), "serve-"+name, name, 2))
			}
		}
	}
	vk := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{"pods": "1000", gpu: fmt.Sprint(overflowGPUs)}).Obj()
	vk.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	c.nodes = append(c.nodes, vk)
	tree, err := fabric.Build([]string{"leaf"}, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	c.tree = tree
	return c
}

func (c *cluster) infos() []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range c.nodes {
		var on []*v1.Pod
		for _, p := range c.pods {
			if p.Spec.NodeName == n.Name {
				on = append(on, p)
			}
		}
		ni := framework.NewNodeInfo(on...)
		ni.SetNode(n)
		out = append(out, ni)
	}
	return out
}

func newPlanner(t *testing.T, b budgets, h holdings) *Planner {
	t.Helper()
	classes, err := overflow.NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	if h.claimed == nil {
		h.claimed = sets.New[string]()
	}
	return &Planner{Classes: classes, Budgets: ledger{budgets: b, held: h.reservations}, Holdings: h, GPU: gpu,
		Config: config.ClaimsConfig{WaveTimeoutSeconds: 300, ReplacementTimeoutSeconds: 120, MakeBeforeBreak: true, WarmTimeoutSeconds: 60}}
}

func names(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// TestPlan: a gang of two 8-GPU pods claims one leaf, all 8 of its
// production pods moved; the plan says where each claimant goes and each
// victim's overflow target, and stays inside what may be planned.
func TestPlan(t *testing.T) {
	twoPods := []*v1.Pod{research("train-0", 8), research("train-1", 8)}
	tests := []struct {
		name     string
		overflow int
		budgets  budgets
		holdings holdings
		fabric   gang.FabricRequest
		pinned   []string
		// wantNodes are the nodes claimed (empty: no plan, and wantWhy
		// is in the reason).
		wantNodes []string
		wantWhy   string
		// wantBlocking are the pods named as alone standing in the way.
		wantBlocking []string
	}{{
		name: "the first leaf by name, its production moved", overflow: 64,
		wantNodes: []string{"l0n0", "l0n1"},
	}, {
		name: "a leaf another claim frees is not planned twice", overflow: 64,
		holdings:  holdings{claimed: sets.New("l0n1")},
		wantNodes: []string{"l1n0", "l1n1"},
	}, {
		name: "a member already placed pins the leaf", overflow: 64,
		pinned:    []string{"l1n1"},
		wantNodes: []string{"l1n0", "l1n1"},
	}, {
		name: "no overflow room for 8 victims: no plan", overflow: 8,
		wantWhy: "overflow",
	}, {
		name: "live claims' reservations take the room", overflow: 24,
		holdings: holdings{reservations: []overflow.Reservation{{Target: overflow.Target{Node: "vk"}, Requests: gpuRequest(16)}}},
		wantWhy:  "overflow",
	}, {
		name: "a pod that may not move keeps its node; a gang that prefers a leaf spans two", overflow: 64,
		budgets:   budgets{"serve-l0n0-0": "PodDisruptionBudget serve allows no disruption", "serve-l1n0-0": "PodDisruptionBudget serve allows no disruption"},
		wantNodes: []string{"l0n1", "l1n1"},
	}, {
		name: "a gang that requires a leaf gets none, and the pod that alone stands in the way is named", overflow: 64,
		budgets: budgets{"serve-l0n1-0": "PodDisruptionBudget serve allows no disruption", "serve-l1n1-0": "PodDisruptionBudget serve allows no disruption"},
		fabric:  gang.FabricRequest{Level: "leaf", Mode: config.FabricModeRequired},
		wantWhy: "1 production pods that cannot move: 1 of other namespaces", wantBlocking: []string{"serve-l0n1-0"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.overflow)
			pl := newPlanner(t, tc.budgets, tc.holdings)
			fab := tc.fabric
			if fab.Mode == "" {
				fab = gang.FabricRequest{Level: "any", Mode: config.FabricModePreferred}
			}
			p, why, blocking := pl.Plan(c.tree, c.infos(), Request{Claimants: twoPods, Pinned: tc.pinned, Fabric: fab})
			var gotBlocking []string
			for _, b := range blocking {
				gotBlocking = append(gotBlocking, b.Pod.Name)
			}
			sort.Strings(gotBlocking)
			if diff := cmp.Diff(tc.wantBlocking, gotBlocking); diff != "" {
				t.Errorf("blocking (-want,+got):\n%s", diff)
			}
			if len(tc.wantNodes) == 0 {
				if p != nil {
					t.Fatalf("planned %v, want no plan", p.Claim.Nodes)
				}
				if !strings.Contains(why, tc.wantWhy) {
					t.Errorf("why %q, want it to say %q", why, tc.wantWhy)
				}
				return
			}
			if p == nil {
				t.Fatalf("no plan: %s", why)
			}
			var gotNodes []string
			for n := range p.Claim.Nodes {
				gotNodes = append(gotNodes, n)
			}
			sort.Strings(gotNodes)
			if diff := cmp.Diff(tc.wantNodes, gotNodes); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
			var wantVictims []string
			for _, n := range tc.wantNodes {
				for i := range 4 {
					wantVictims = append(wantVictims, fmt.Sprintf("serve-%s-%d", n, i))
				}
			}
			if diff := cmp.Diff(wantVictims, names(p.Victims())); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			for _, v := range p.Victims() {
				if p.Claim.Targets["prod/"+v.Name].Node != "vk" {
					t.Errorf("victim %s targets %v, want vk", v.Name, p.Claim.Targets["prod/"+v.Name])
				}
			}
			assigned := p.Assign(twoPods)
			if len(assigned) != 2 || assigned["research/train-0"] == assigned["research/train-1"] {
				t.Errorf("assigned %v, want each claimant its own claimed node", assigned)
			}
		})
	}
}

func gpuRequest(n int64) capacity.Resources {
	return capacity.Resources{Pods: n / 2, Scalar: map[v1.ResourceName]int64{gpu: n}}
}

// TestClaim: the claim written for a plan names its claimant key, owner,
// nominations, the engine's settings, and each victim with what the
// engine needs (node, controller, budget, target, requests, template
// hash), node by node.
func TestClaim(t *testing.T) {
	c := newCluster(t, 64)
	pl := newPlanner(t, nil, holdings{})
	claimants := []*v1.Pod{research("train-0", 8), research("train-1", 8)}
	p, why, _ := pl.Plan(c.tree, c.infos(), Request{Claimants: claimants, Fabric: gang.FabricRequest{Level: "leaf", Mode: config.FabricModeRequired}})
	if p == nil {
		t.Fatal(why)
	}
	owner := metav1.OwnerReference{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "train", UID: "pg"}
	got := pl.Claim("research/train (scheduling.k8s.io/v1beta1)", owner, claimants, p, p.Assign(claimants), 2)
	if got.Name != claims.NameOf("research/train (scheduling.k8s.io/v1beta1)") || got.Namespace != "research" ||
		got.Annotations[claims.AttemptsAnnotation] != "2" || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "pg" {
		t.Errorf("claim %s/%s, annotations %v, owners %v", got.Namespace, got.Name, got.Annotations, got.OwnerReferences)
	}
	if got.Spec.TimeoutSeconds != 300 || got.Spec.ReplacementTimeoutSeconds != 120 || !got.Spec.MakeBeforeBreak || got.Spec.WarmTimeoutSeconds != 60 {
		t.Errorf("settings %+v, want the engine's", got.Spec)
	}
	wantClaimants := []v1alpha1.Claimant{{Name: "train-0", UID: "train-0", Node: "l0n0"}, {Name: "train-1", UID: "train-1", Node: "l0n1"}}
	if diff := cmp.Diff(wantClaimants, got.Spec.Claimants); diff != "" {
		t.Errorf("claimants (-want,+got):\n%s", diff)
	}
	if len(got.Spec.Victims) != 8 {
		t.Fatalf("%d victims, want 8", len(got.Spec.Victims))
	}
	for i, v := range got.Spec.Victims {
		wantNode := "l0n0"
		if i >= 4 {
			wantNode = "l0n1"
		}
		want := v1alpha1.Victim{Namespace: "prod", Name: v.Name, UID: types.UID(v.Name), Node: wantNode,
			Owner:  v1alpha1.Owner{Kind: "ReplicaSet", Name: "serve-" + wantNode, UID: types.UID("rs-serve-" + wantNode)},
			Budget: "default/prod/ReplicaSet/serve-" + wantNode, Target: v1alpha1.Target{Node: "vk"},
			Requests:     v1.ResourceList{gpu: resource.MustParse("2"), v1.ResourceCPU: resource.MustParse("1")},
			TemplateHash: "abc"}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("victim %d (-want,+got):\n%s", i, diff)
		}
	}
	if !strings.Contains(got.Spec.Note, "8 production pods") {
		t.Errorf("note %q", got.Spec.Note)
	}
}
