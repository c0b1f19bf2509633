// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabrictopology

import (
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// candidatesAtLowest is how many domains of the lowest fitting level are
// offered as placements; every higher level adds its best domain as a
// fallback. Each placement costs one simulated scheduling of the gang, so
// the number stays small.
const candidatesAtLowest = 2

// gangPlan is what a placement decision needs to know about a gang.
type gangPlan struct {
	key     gang.Key
	request gang.FabricRequest
	// pods is the number of members to place now; minPods the fewest that
	// let the gang run (its minimum minus members already placed).
	pods, minPods int
	// template is the largest member: every member is assumed that big.
	template *v1.Pod
	// pinned are the nodes of members already placed.
	pinned []string
}

// decision is the outcome of planning: candidate placements, best first,
// or an explanation of why there are none.
type decision struct {
	tree    *fabric.Tree
	overlay *fabric.Overlay
	// infos are the NodeInfos planned over, by tree index (nil for a
	// node of the tree that was not among them).
	infos      []fwk.NodeInfo
	candidates []fabric.Placement
	// pods is how many members the candidates place.
	pods        int
	explanation string
	// fallback, when nothing holds the gang, is the domain of the highest
	// allowed level with the most room (see GeneratePlacements).
	fallback *fabric.Domain
}

// decide plans a gang over nodes. With lowestOnly it offers only the
// candidates of the lowest level that holds the gang (see
// GeneratePlacements), and does not search the levels above.
func (pl *FabricTopology) decide(tree *fabric.Tree, nodes []fwk.NodeInfo, p gangPlan, lowestOnly bool) decision {
	slots, infos := pl.slots.of(tree, nodes, p.template, pl.external)
	overlay := tree.Overlay(slots)
	var pinned []int
	for _, name := range p.pinned {
		if i, ok := tree.NodeIndex(name); ok {
			pinned = append(pinned, i)
		}
	}
	maxLevel := levelIndex(tree, p.request)
	counts := []int{p.pods}
	if p.minPods > 0 && p.minPods < p.pods {
		counts = append(counts, p.minPods)
	}
	search := func(req fabric.Request) []fabric.Placement {
		if lowestOnly {
			return overlay.LowestCandidates(req, candidatesAtLowest)
		}
		return trim(overlay.Candidates(req, candidatesAtLowest))
	}
	for _, n := range counts {
		req := fabric.Request{Pods: n, MaxLevel: maxLevel, Pinned: pinned}
		cands := search(req)
		if len(cands) == 0 && p.request.Mode == config.FabricModePreferred && maxLevel < tree.RootLevel() {
			req.MaxLevel = tree.RootLevel()
			cands = search(req)
		}
		if len(cands) > 0 {
			return decision{tree: tree, overlay: overlay, infos: infos, candidates: cands, pods: n}
		}
	}
	if p.request.Mode == config.FabricModePreferred {
		maxLevel = tree.RootLevel()
	}
	return decision{tree: tree, overlay: overlay, infos: infos, explanation: pl.explain(tree, overlay, p, maxLevel, pinned),
		fallback: roomiest(tree, overlay, maxLevel, pinned)}
}

// roomiest is the domain of a level, containing the pinned nodes, with the
// most free slots (the first by name on a tie); nil if the level is empty.
func roomiest(tree *fabric.Tree, o *fabric.Overlay, level int, pinned []int) *fabric.Domain {
	var best *fabric.Domain
	for _, d := range tree.Domains(level) {
		if len(pinned) > 0 && !tree.Contains(d, pinned[0]) {
			continue
		}
		if best == nil || o.Free(d) > o.Free(best) {
			best = d
		}
	}
	return best
}

// trim keeps candidatesAtLowest placements of the lowest level and the best
// of each higher level.
func trim(cands []fabric.Placement) []fabric.Placement {
	var out []fabric.Placement
	for i, c := range cands {
		if i == 0 || c.Domain.Level != cands[0].Domain.Level {
			if len(out) > 0 && out[len(out)-1].Domain.Level == c.Domain.Level {
				continue
			}
			out = append(out, c)
			continue
		}
		if len(out) < candidatesAtLowest {
			out = append(out, c)
		}
	}
	return out
}

// explain says in numbers why no domain holds the gang, e.g. "gang of 32
// pods (8 nvidia.com/gpu each) needs one leaf with room for 32 pods; the
// largest leaf has room for 24, the cluster for 40".
func (pl *FabricTopology) explain(tree *fabric.Tree, o *fabric.Overlay, p gangPlan, maxLevel int, pinned []int) string {
	size := "its requests"
	if gpus := capacity.ShapeOf(p.template).Scalar[pl.gpu]; gpus > 0 {
		size = fmt.Sprintf("%d %s", gpus, pl.gpu)
	}
	need := p.pods
	if p.minPods > 0 && p.minPods < need {
		need = p.minPods
	}
	cluster := o.Free(tree.Root())
	if p.request.Mode == config.FabricModePreferred || maxLevel >= tree.RootLevel() {
		return fmt.Sprintf("gang %s of %d pods (%s each) needs room for %d pods; the cluster has room for %d",
			p.key.Name, p.pods, size, need, cluster)
	}
	levelName := tree.LevelName(maxLevel)
	largest, where := 0, "none"
	if d := roomiest(tree, o, maxLevel, pinned); d != nil {
		largest, where = o.Free(d), d.Name
	}
	pinnedNote := ""
	if len(pinned) > 0 {
		pinnedNote = fmt.Sprintf(" (the one holding its %d placed members)", len(pinned))
	}
	return fmt.Sprintf("gang %s of %d pods (%s each) needs one %s with room for %d pods; the largest %s%s, %s, has room for %d, the cluster for %d",
		p.key.Name, p.pods, size, levelName, need, levelName, pinnedNote, where, largest, cluster)
}

// nodesOf lists the nodes of a placement's parts (the whole domain when it
// is a node or has no parts), limited to the given NodeInfos.
func nodesOf(tree *fabric.Tree, p fabric.Placement, byIndex []fwk.NodeInfo) []fwk.NodeInfo {
	parts := p.Parts
	if len(parts) == 0 {
		parts = []*fabric.Domain{p.Domain}
	}
	var out []fwk.NodeInfo
	for _, d := range parts {
		for _, i := range tree.NodesOf(d) {
			if ni := byIndex[i]; ni != nil {
				out = append(out, ni)
			}
		}
	}
	return out
}

// slotCache remembers, per node, how many pods of the last shape asked
// about fit there, as of a NodeInfo generation: consecutive gangs usually
// share a shape, and between two gangs only the nodes that changed need
// counting again (counting every node was most of a decision's cost). It
// also remembers the tree index of each position of the last list: the
// scheduler's snapshot keeps one NodeInfo per node, in the same order
// between cycles, so finding every node's tree index by name (a string
// hash per node, per gang) is needed only where the list changed.
type slotCache struct {
	mu   sync.Mutex
	tree *fabric.Tree
	// index is the tree index of each position of the last list (-1: not
	// in the tree, or not known), a guess that of confirms.
	index []int32
	// shape is the last shape's key; shapeVersion counts shape changes.
	shape        string
	shapeVersion uint64
	// entries are by tree index.
	entries []slotEntry
	// counted is how many nodes were counted (not taken from the cache).
	counted int
}

type slotEntry struct {
	info         fwk.NodeInfo // the last one seen holding this node
	shapeVersion uint64
	generation   int64  // the NodeInfo's
	external     uint64 // the External's, 0 without one
	slots        int
}

// of returns, by tree index, the slots of every node for pods like
// template, and the NodeInfo of every node of the tree among nodes (nil
// for the others). A node's count is cached under its NodeInfo generation
// and, with an External (Slurm's drained nodes and held GPUs), the
// External's generation, so between two gangs only changed nodes are
// counted again.
//
// Every change to a NodeInfo takes the next value of one global
// generation counter, and a copy (Snapshot, which the scheduler's
// snapshot and preemption's simulations make of every node) keeps its
// generation: two NodeInfos of one node in one generation hold the same.
// (Except while the scheduling snapshot has pods assumed: AssumePod and
// ForgetPod keep a NodeInfo's generation. A pod group's decision is made
// before its own pods are assumed; only composite pod groups, an alpha
// feature sluice does not enable, would decide a child group after its
// siblings' pods were assumed, and could then get a stale count.)
func (c *slotCache) of(tree *fabric.Tree, nodes []fwk.NodeInfo, template *v1.Pod, ext capacity.External) ([]int, []fwk.NodeInfo) {
	shape := capacity.ShapeOf(template)
	key := shapeKey(template)
	var extGen uint64
	if ext != nil {
		extGen = ext.Generation()
	}
	slots := make([]int, tree.NumNodes())
	byIndex := make([]fwk.NodeInfo, tree.NumNodes())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree != tree {
		c.tree, c.index = tree, nil
		c.entries = make([]slotEntry, tree.NumNodes())
	}
	if key != c.shape {
		c.shape = key
		c.shapeVersion++
	}
	if len(c.index) != len(nodes) {
		c.index = make([]int32, len(nodes))
		for p := range c.index {
			c.index[p] = -1
		}
	}
	for p, ni := range nodes {
		i := int(c.index[p])
		generation := ni.GetGeneration()
		// The NodeInfo seen at i in this generation still holds node i
		// (which node a NodeInfo holds changes only through SetNode or
		// RemoveNode, which take a new generation). Otherwise check by
		// name: a copy of it, or of the node's previous NodeInfo, passes
		// without a lookup. (A node outside the tree, such as the overflow
		// node, is looked up every time: there are few.)
		if i < 0 || (c.entries[i].info != ni || c.entries[i].generation != generation) && tree.Node(i).Name != ni.Node().Name {
			if i = nodeIndex(tree, ni); i < 0 {
				c.index[p] = -1
				continue
			}
			c.index[p] = int32(i)
		}
		e := &c.entries[i]
		byIndex[i] = ni
		if e.shapeVersion == c.shapeVersion && e.generation == generation && e.external == extGen {
			e.info = ni
			slots[i] = e.slots
			continue
		}
		slots[i] = shape.SlotsWith(ni, ext)
		c.counted++
		*e = slotEntry{info: ni, shapeVersion: c.shapeVersion, generation: generation, external: extGen, slots: slots[i]}
	}
	return slots, byIndex
}

// nodeIndex is ni's index in the tree, -1 if it is not there.
func nodeIndex(tree *fabric.Tree, ni fwk.NodeInfo) int {
	if i, ok := tree.NodeIndex(ni.Node().Name); ok {
		return i
	}
	return -1
}

// shapeKey identifies what Slots depends on in a pod: its requests and
// where it may run.
func shapeKey(pod *v1.Pod) string {
	data, err := json.Marshal(struct {
		Requests     v1.ResourceList
		Tolerations  []v1.Toleration
		NodeSelector map[string]string
		Affinity     *v1.Affinity
	}{resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}), pod.Spec.Tolerations, pod.Spec.NodeSelector, pod.Spec.Affinity})
	if err != nil {
		return string(pod.UID)
	}
	return string(data)
}
