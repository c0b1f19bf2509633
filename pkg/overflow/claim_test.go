// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflow

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// fabric16 is 2 spines x 2 leaves x 4 nodes, names s<s>l<l>n<n>.
func fabric16(t *testing.T) *fabric.Tree {
	t.Helper()
	var nodes []fabric.Node
	for s := 0; s < 2; s++ {
		for l := 0; l < 2; l++ {
			for n := 0; n < 4; n++ {
				nodes = append(nodes, fabric.Node{Name: fmt.Sprintf("s%dl%dn%d", s, l, n), Switches: []string{fmt.Sprintf("s%dl%d", s, l), fmt.Sprintf("s%d", s)}})
			}
		}
	}
	tree, err := fabric.Build([]string{"leaf", "spine"}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func prodPod(name string, gpus int) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("prod").UID(name).
		Req(map[v1.ResourceName]string{gpu: fmt.Sprint(gpus), v1.ResourceCPU: "1"}).Obj()
	p.Spec.PriorityClassName = "production"
	return p
}

// nodeStates gives every node of the tree 8 GPUs with the listed
// production pods on it.
func nodeStates(tree *fabric.Tree, pods map[string][]*v1.Pod) []NodeState {
	var out []NodeState
	for i := 0; i < tree.NumNodes(); i++ {
		name := tree.Node(i).Name
		free := capacity.Resources{MilliCPU: 128000, Memory: 1 << 40, Pods: 110, Scalar: map[v1.ResourceName]int64{gpu: 8}}
		for _, p := range pods[name] {
			free = free.Sub(capacity.RequestsOf(p))
		}
		victims := append([]*v1.Pod(nil), pods[name]...)
		VictimOrder(victims, gpu)
		out = append(out, NodeState{Name: name, Free: free, Eligible: true, Victims: victims})
	}
	return out
}

// roomWith is the ledger of one Ready overflow node vk whose providers
// offer the GPUs given, in dispatch order (one unnamed provider when
// only one is given), less what reservations hold.
func roomWith(t *testing.T, gpus []int, reservations ...Reservation) *Ledger {
	t.Helper()
	c, err := NewClasses(nil, nil, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	node := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").
		Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "10000", v1.ResourceMemory: "100Ti", v1.ResourcePods: "10000", gpu: "1000"}).Obj()
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	var o offer.Offer
	for i, g := range gpus {
		o.Providers = append(o.Providers, offer.Provider{Name: fmt.Sprintf("p%d", i), Healthy: true,
			Capacity: v1.ResourceList{gpu: resource.MustParse(fmt.Sprint(g))}})
	}
	raw, err := o.Encode()
	if err != nil {
		t.Fatal(err)
	}
	node.Annotations = map[string]string{offer.Annotation: raw}
	return NewLedger(c, []*v1.Node{node}, func(string) []*v1.Pod { return nil }, reservations)
}

func gangShape(gpus int) capacity.Shape {
	p := st.MakePod().Req(map[v1.ResourceName]string{gpu: fmt.Sprint(gpus), v1.ResourceCPU: "8"}).Obj()
	return capacity.ShapeOf(p)
}

func victimNames(c Claim) []string {
	var out []string
	for _, vs := range c.Victims {
		for _, v := range vs {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestPlanClaimFewestVictims is the scenario table: a fragmented cluster,
// a gang, the domain and victims expected.
func TestPlanClaimFewestVictims(t *testing.T) {
	// Every leaf is partly used by production, so no leaf holds a gang of
	// 4 whole nodes without evictions:
	//   s0l0: one 1-GPU pod on each node                 -> 4 victims
	//   s0l1: two 2-GPU pods on n0 and on n1 (nodes 2,3 empty) -> 4 victims
	//   s1l0: one 4-GPU pod on n0 (others empty)         -> 1 victim
	//   s1l1: eight 1-GPU pods on n0, one on n1           -> 8 victims
	pods := map[string][]*v1.Pod{
		"s1l1n1": {prodPod("e0", 1)},
		"s0l0n0": {prodPod("a0", 1)}, "s0l0n1": {prodPod("a1", 1)}, "s0l0n2": {prodPod("a2", 1)}, "s0l0n3": {prodPod("a3", 1)},
		"s0l1n0": {prodPod("b0", 2), prodPod("b1", 2)}, "s0l1n1": {prodPod("b2", 2), prodPod("b3", 2)},
		"s1l0n0": {prodPod("c0", 4)},
		"s1l1n0": {prodPod("d0", 1), prodPod("d1", 1), prodPod("d2", 1), prodPod("d3", 1), prodPod("d4", 1), prodPod("d5", 1), prodPod("d6", 1), prodPod("d7", 1)},
	}
	tests := []struct {
		name        string
		pods        int
		gpus        int
		maxLevel    int
		room        []int // GPUs each overflow provider offers
		reserved    int   // GPUs live claims hold on the first provider
		wantDomain  string
		wantVictims []string
		wantNodes   map[string]int
		wantWhy     string
	}{
		{
			name: "gang of 4 whole nodes: the leaf with one victim",
			pods: 4, gpus: 8, maxLevel: 2, room: []int{1000},
			wantDomain: "leaf/s1l0", wantVictims: []string{"c0"},
			wantNodes: map[string]int{"s1l0n0": 1, "s1l0n1": 1, "s1l0n2": 1, "s1l0n3": 1},
		},
		{
			// 6 whole nodes: no leaf has 6 nodes, so a spine. Spine s1 has
			// 5 free nodes (s1l0n1-3, s1l1n2-3) and needs one more: c0 or
			// e0, one victim either way; s1l0n0 comes first by name. Spine
			// s0 has 2 free nodes and needs 4 victims.
			name: "gang of 6 whole nodes: the spine with the fewest victims",
			pods: 6, gpus: 8, maxLevel: 2, room: []int{1000},
			wantDomain: "spine/s1", wantVictims: []string{"c0"},
		},
		{
			// A 4-GPU pod: s1l0n0 has 4 free already, so it fits without
			// preemption... which FabricTopology would have found; a
			// 6-GPU pod needs one victim somewhere: on s0l0n0 (a0, 1 GPU).
			name: "single 8-GPU pod: the node with the fewest victims",
			pods: 1, gpus: 8, maxLevel: 0, room: []int{1000},
			wantDomain: "s0l0n0", wantVictims: []string{"a0"},
		},
		{
			name: "overflow full: nothing is evicted into nowhere",
			pods: 4, gpus: 8, maxLevel: 1, room: []int{0},
			wantWhy: "the overflow nodes have no room",
		},
		{
			name: "required leaf, room for 1 victim only",
			pods: 4, gpus: 8, maxLevel: 1, room: []int{4},
			wantDomain: "leaf/s1l0", wantVictims: []string{"c0"},
		},
		{
			// 4 + 4 GPUs of room, but the one victim that would do needs
			// 4 GPUs on one provider: it fits p0. Then the 8-GPU victims
			// of the spine case do not.
			name: "room split over providers: a victim fits one provider whole",
			pods: 4, gpus: 8, maxLevel: 1, room: []int{4, 4},
			wantDomain: "leaf/s1l0", wantVictims: []string{"c0"},
		},
		{
			name: "room held by a live claim is not counted again",
			pods: 4, gpus: 8, maxLevel: 1, room: []int{4}, reserved: 1,
			wantWhy: "the overflow nodes have no room for d3 (",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := fabric16(t)
			full := map[string][]*v1.Pod{}
			for k, v := range pods {
				full[k] = v
			}
			if tt.pods == 1 {
				// Fill every node so a whole node needs evictions.
				for i := 0; i < tree.NumNodes(); i++ {
					n := tree.Node(i).Name
					if len(full[n]) == 0 {
						full[n] = []*v1.Pod{prodPod("fill-"+n+"-0", 4), prodPod("fill-"+n+"-1", 4)}
					}
				}
			}
			claim, why, ok := PlanClaim(tree, nodeStates(tree, full), Request{Shape: gangShape(tt.gpus), Pods: tt.pods, MaxLevel: tt.maxLevel, Namespace: "prod"}, roomWith(t, tt.room, reservation(tt.reserved)...))
			if tt.wantWhy != "" {
				if ok {
					t.Fatalf("planned %s with victims %v, want no plan", claim.Domain.Name, victimNames(claim))
				}
				if !contains(why, tt.wantWhy) {
					t.Errorf("why = %q, want it to contain %q", why, tt.wantWhy)
				}
				return
			}
			if !ok {
				t.Fatalf("no plan: %s", why)
			}
			if claim.Domain.Name != tt.wantDomain {
				t.Errorf("domain %s, want %s", claim.Domain.Name, tt.wantDomain)
			}
			if diff := cmp.Diff(tt.wantVictims, victimNames(claim)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if tt.wantNodes != nil {
				if diff := cmp.Diff(tt.wantNodes, claim.Nodes); diff != "" {
					t.Errorf("gang nodes (-want,+got):\n%s", diff)
				}
			}
			for name, target := range claim.Targets {
				if target.Node != "vk" || target.Provider == "" {
					t.Errorf("victim %s counted against %v, want a provider of the overflow node vk", name, target)
				}
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func reservation(gpus int) []Reservation {
	if gpus == 0 {
		return nil
	}
	return []Reservation{{Target: Target{Node: "vk", Provider: "p0"}, Requests: capacity.Resources{Pods: 1, Scalar: map[v1.ResourceName]int64{gpu: int64(gpus)}}}}
}

// TestLedgerOneProviderPerVictim: an 8-GPU victim is never counted into
// 4 + 4 GPUs of two providers; dispatch needs one that holds it whole.
func TestLedgerOneProviderPerVictim(t *testing.T) {
	eight := prodPod("big", 8)
	four := prodPod("half", 4)
	l := roomWith(t, []int{4, 4})
	if target, ok := l.Clone().Take(eight); ok {
		t.Fatalf("an 8-GPU victim was counted against %v of 4 + 4 GPUs", target)
	}
	first, ok1 := l.Take(four)
	second, ok2 := l.Take(four)
	_, ok3 := l.Take(four)
	if !ok1 || !ok2 || ok3 || first.Provider != "p0" || second.Provider != "p1" {
		t.Errorf("4-GPU victims went to %v (%v), %v (%v), third %v; want p0, p1, then no room", first, ok1, second, ok2, ok3)
	}
	if ok, why := l.Holds(first); !ok {
		t.Errorf("a full provider holds what was taken on it: %s", why)
	}
}

// TestLedgerHolds: a target stops holding its reservations when its node
// turns NotReady or its provider's capacity shrinks below them.
func TestLedgerHolds(t *testing.T) {
	res := reservation(4)
	if ok, why := roomWith(t, []int{4}, res...).Holds(res[0].Target); !ok {
		t.Errorf("4 GPUs reserved on 4: %s", why)
	}
	if ok, _ := roomWith(t, []int{2}, res...).Holds(res[0].Target); ok {
		t.Error("4 GPUs reserved on a provider shrunk to 2 still hold")
	}
	c, _ := NewClasses(nil, nil, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	notReady := st.MakeNode().Name("vk").Label("type", "virtual-kubelet").Capacity(map[v1.ResourceName]string{gpu: "8"}).Obj()
	l := NewLedger(c, []*v1.Node{notReady}, func(string) []*v1.Pod { return nil }, nil)
	if ok, why := l.Holds(Target{Node: "vk"}); ok || !contains(why, "not Ready") {
		t.Errorf("a NotReady overflow node holds: %v %q", ok, why)
	}
}

// TestBlockedPodsAreNamed: when only pods that may not move stand in the
// way, the plan says which and why to their own namespace, and only counts
// them to another (a tenant never learns another's pods or budgets).
func TestBlockedPodsAreNamed(t *testing.T) {
	tree := fabric16(t)
	var states []NodeState
	for _, st := range nodeStates(tree, nil) {
		// One protected 1-GPU pod on every node: no node is whole.
		p := prodPod("keep-"+st.Name, 1)
		st.Free = st.Free.Sub(capacity.RequestsOf(p))
		st.Blocked = []Blocked{{Pod: p, Why: "PodDisruptionBudget keep allows no disruption (maxUnavailable 0)"}}
		states = append(states, st)
	}
	plan := func(namespace string) string {
		_, why, ok := PlanClaim(tree, states, Request{Shape: gangShape(8), Pods: 4, MaxLevel: 1, Namespace: namespace}, roomWith(t, []int{1000}))
		if ok {
			t.Fatal("planned a claim that needs protected pods")
		}
		return why
	}
	why := plan("prod")
	for _, want := range []string{"cannot move", "keep-s0l0n0", "maxUnavailable 0"} {
		if !contains(why, want) {
			t.Errorf("to its own namespace, why = %q, want it to name %q", why, want)
		}
	}
	why = plan("research")
	if !contains(why, "4 production pods that cannot move: 4 of other namespaces") {
		t.Errorf("to another namespace, why = %q, want it to count the pods", why)
	}
	for _, secret := range []string{"prod/", "keep", "PodDisruptionBudget"} {
		if contains(why, secret) {
			t.Errorf("to another namespace, why = %q names %q", why, secret)
		}
	}
}

func TestEligibility(t *testing.T) {
	c, err := NewClasses([]string{"research"}, []string{"production"}, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	tolerating := prodPod("ok", 1)
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: v1.TolerationOpExists}}
	never := tolerating.DeepCopy()
	never.Annotations = map[string]string{Annotation: Never}
	research := tolerating.DeepCopy()
	research.Spec.PriorityClassName = "research"
	for _, tt := range []struct {
		pod  *v1.Pod
		want bool
	}{
		{tolerating, true},
		{prodPod("intolerant", 1), false},
		{never, false},
		{research, false},
	} {
		if got := c.Eligible(tt.pod); got != tt.want {
			t.Errorf("Eligible(%s %v) = %v, want %v", tt.pod.Name, tt.pod.Annotations, got, tt.want)
		}
	}
}

// TestPlanClaimTargets: each victim is counted against the overflow node
// and provider that has room for it, here the second of two nodes, and
// never against one that has none.
func TestPlanClaimTargets(t *testing.T) {
	c, err := NewClasses(nil, nil, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	overflowNode := func(name string, gpus int) *v1.Node {
		n := st.MakeNode().Name(name).Label("type", "virtual-kubelet").
			Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "10000", v1.ResourceMemory: "100Ti", v1.ResourcePods: "10000", gpu: fmt.Sprint(gpus)}).Obj()
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		return n
	}
	// vk-a is full (its one provider offers 0), vk-b has 8 GPUs.
	ledger := NewLedger(c, []*v1.Node{overflowNode("vk-a", 0), overflowNode("vk-b", 8)}, func(string) []*v1.Pod { return nil }, nil)
	tree := fabric16(t)
	pods := map[string][]*v1.Pod{}
	for i := 0; i < tree.NumNodes(); i++ {
		n := tree.Node(i).Name
		pods[n] = []*v1.Pod{prodPod(n+"-a", 4), prodPod(n+"-b", 4)}
	}
	claim, why, ok := PlanClaim(tree, nodeStates(tree, pods), Request{Shape: gangShape(8), Pods: 1, MaxLevel: 0}, ledger)
	if !ok {
		t.Fatalf("no plan: %s", why)
	}
	if len(claim.Targets) != 2 {
		t.Fatalf("targets %v, want one per victim", claim.Targets)
	}
	for name, target := range claim.Targets {
		if target.Node != "vk-b" {
			t.Errorf("victim %s counted against %v, want vk-b (vk-a has no room)", name, target)
		}
	}
}

// TestLedgerPortability: a victim is counted only against a provider that
// can run it as written; one that no provider can run is named with why.
func TestLedgerPortability(t *testing.T) {
	c, err := NewClasses(nil, nil, "type=virtual-kubelet", "virtual-kubelet.io/provider")
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string, carries *offer.Carries) *v1.Node {
		n := st.MakeNode().Name(name).Label("type", "virtual-kubelet").Obj()
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
		raw, err := offer.Offer{Providers: []offer.Provider{{Name: "p", Healthy: true, Carries: carries,
			Capacity: v1.ResourceList{gpu: resource.MustParse("16")}}}}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{offer.Annotation: raw}
		return n
	}
	plain := prodPod("plain", 4)
	secret := prodPod("secret", 4)
	secret.Spec.Containers[0].Env = []v1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}
	huge := prodPod("huge", 32)

	sluiceOnly := NewLedger(c, []*v1.Node{node("vk-a", &offer.Carries{Volumes: []string{"emptyDir"}})}, func(string) []*v1.Pod { return nil }, nil)
	if why := sluiceOnly.CannotRun(plain); why != "" {
		t.Errorf("plain pod: %s", why)
	}
	if why := sluiceOnly.CannotRun(secret); !strings.Contains(why, "vk-a provider p: spec.containers[0]") || !strings.Contains(why, "env HF_TOKEN refers to Secret hf") {
		t.Errorf("secret pod: CannotRun = %q, want it to name vk-a's provider p and env HF_TOKEN", why)
	}
	if why := sluiceOnly.CannotRun(huge); !strings.Contains(why, "requests 32 nvidia.com/gpu, more than the provider's 16") {
		t.Errorf("32-GPU pod: CannotRun = %q, want the provider's 16 GPUs named", why)
	}
	if target, ok := sluiceOnly.Clone().Take(secret); ok {
		t.Errorf("the secret pod was counted against %v, which cannot run it", target)
	}
	if _, ok := sluiceOnly.Clone().Take(plain); !ok {
		t.Errorf("the plain pod found no room")
	}
	// A second node that does not say what it carries (not sluice's) is
	// taken to run what it accepts.
	mixed := NewLedger(c, []*v1.Node{node("vk-a", &offer.Carries{}), node("vk-b", nil)}, func(string) []*v1.Pod { return nil }, nil)
	if target, ok := mixed.Take(secret); !ok || target.Node != "vk-b" {
		t.Errorf("secret pod with vk-b: counted against %v (%v), want vk-b", target, ok)
	}
}
