// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-sched/sluice/pkg/gang"
	"github.com/sluice-sched/sluice/test/harness"
)

// apis are the two gang APIs every scenario runs with.
var apis = []gang.API{gang.Native, gang.Label}

// fabricNodes creates spines x leaves x nodes GPU nodes with 8 GPUs under
// one block; names are <prefix>-s<spine>l<leaf>n<node>, leaf switches
// s<spine>l<leaf>.
func fabricNodes(t *testing.T, cp *harness.ControlPlane, prefix string, spines, leaves, nodes int) {
	t.Helper()
	var all []*v1.Node
	for s := 0; s < spines; s++ {
		for l := 0; l < leaves; l++ {
			for n := 0; n < nodes; n++ {
				name := fmt.Sprintf("%s-s%dl%dn%d", prefix, s, l, n)
				all = append(all, harness.GPUNode(name, 8).Fabric(fmt.Sprintf("s%dl%d", s, l), fmt.Sprintf("s%d", s), "b0").Obj())
			}
		}
	}
	harness.CreateNodes(t, cp.Client, all...)
}

// occupy binds filler pods taking all 8 GPUs of each named node.
func occupy(t *testing.T, cp *harness.ControlPlane, ns string, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		harness.CreatePods(t, cp.Client, harness.Pod(ns, "filler-"+n).GPUs(8).OnNode(n).Obj())
	}
}

// gangSpec is a gang to create.
type gangSpec struct {
	name        string
	pods        int
	gpus        int
	minCount    int32
	timeout     int32
	annotations map[string]string
	// gated pods get a scheduling gate (they count as members but are not
	// scheduled until it is removed).
	gated int
}

// createGang creates the PodGroup of the API and its member pods, scheduled
// by sluice-research, and returns the pod names.
func createGang(t *testing.T, cp *harness.ControlPlane, ns string, api gang.API, g gangSpec) []string {
	t.Helper()
	minCount := g.minCount
	if minCount == 0 {
		minCount = int32(g.pods)
	}
	switch api {
	case gang.Native:
		harness.CreateNativePodGroup(t, cp.Client, harness.NativePodGroup(ns, g.name, minCount, g.annotations))
	case gang.Label:
		harness.CreateLabelPodGroup(t, cp, harness.LabelPodGroup(ns, g.name, minCount, g.timeout, g.annotations))
	}
	var names []string
	for i := 0; i < g.pods; i++ {
		name := fmt.Sprintf("%s-%d", g.name, i)
		b := harness.Pod(ns, name).Scheduler("sluice-research").GPUs(g.gpus)
		if api == gang.Native {
			b = b.SchedulingGroup(g.name)
		} else {
			b = b.Label("scheduling.x-k8s.io/pod-group", g.name)
		}
		if i >= g.pods-g.gated {
			b = b.SchedulingGate("test.sluice.dev/hold")
		}
		harness.CreatePods(t, cp.Client, b.Obj())
		names = append(names, name)
	}
	return names
}

// leafOf is the leaf switch of a node named <prefix>-s<spine>l<leaf>n<node>.
func leafOf(node string) string {
	i := strings.LastIndex(node, "-")
	s := node[i+1:]
	return s[:strings.Index(s, "n")]
}

// leaves lists the distinct leaves of the bound nodes.
func leaves(bound map[string]string) []string {
	set := map[string]bool{}
	for _, n := range bound {
		set[leafOf(n)] = true
	}
	var out []string
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func spineOf(leaf string) string { return leaf[:strings.Index(leaf, "l")] }

// podGroupCondition waits for a condition on the gang's PodGroup and returns
// "<status> <reason>: <message>".
func podGroupCondition(t *testing.T, cp *harness.ControlPlane, ns string, api gang.API, name, condType string) string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := harness.LabelPodGroupResource
	if api == gang.Native {
		gvr = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
	}
	var found string
	harness.Eventually(t, harness.DefaultTimeout, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == condType {
				found = fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
				return true, nil
			}
		}
		return false, nil
	}, func() string { return fmt.Sprintf("PodGroup %s/%s has no %s condition", ns, name, condType) })
	return found
}
