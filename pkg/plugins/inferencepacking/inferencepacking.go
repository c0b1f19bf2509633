// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package inferencepacking is the InferencePacking plugin (production
// profile): it packs inference onto nodes, then leaf switches, that already
// run production, so whole nodes and whole leaves stay free for training
// gangs, and it puts overflow nodes last, so production overflows only when
// no physical node fits.
package inferencepacking

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/config/validation"
	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/fabric"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/plugins/fabrictopology"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "InferencePacking"

// Score parts; they add up to fwk.MaxScore for the best physical node.
const (
	// physicalFloor puts every physical node above every overflow node
	// (which scores 0) by a margin that, with the plugin's weight, other
	// scores do not bridge.
	physicalFloor = 40
	nodeTerm      = 30
	leafTerm      = 20
	packTerm      = 10
)

// InferencePacking is the plugin.
type InferencePacking struct {
	handle  fwk.Handle
	classes *overflow.Classes
	tracker *fabric.Tracker
	gpu     v1.ResourceName

	// marks remembers, per node, whether it runs production as of a
	// NodeInfo generation, so PreScore rescans only the pods of nodes that
	// changed since the last cycle (one or two), not every pod.
	mu    sync.Mutex
	marks map[string]mark
}

// mark is whether a node ran production at a NodeInfo generation.
type mark struct {
	generation int64
	production bool
}

var (
	_ fwk.PreScorePlugin = &InferencePacking{}
	_ fwk.ScorePlugin    = &InferencePacking{}
	_ fwk.SignPlugin     = &InferencePacking{}
)

// New builds the plugin from InferencePackingArgs.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.InferencePackingArgs)
	if !ok {
		return nil, fmt.Errorf("want args to be of type InferencePackingArgs, got %T", obj)
	}
	if err := validation.ValidateInferencePackingArgs(validation.ArgsPath(h.ProfileName(), Name), args); err != nil {
		return nil, err
	}
	classes, err := overflow.NewClasses(args.Overflow.ResearchPriorityClasses, args.Overflow.ProductionPriorityClasses,
		args.Overflow.OverflowNodeSelector, args.Overflow.OverflowTaintKey)
	if err != nil {
		return nil, err
	}
	source, err := fabrictopology.NewSource(&args.Fabric)
	if err != nil {
		return nil, err
	}
	tracker, err := fabric.SharedTracker(ctx, source, h.SharedInformerFactory().Core().V1().Nodes().Informer())
	if err != nil {
		return nil, err
	}
	return &InferencePacking{handle: h, classes: classes, tracker: tracker, gpu: v1.ResourceName(args.Fabric.GPUResourceName)}, nil
}

// Name returns the plugin name.
func (pl *InferencePacking) Name() string { return Name }

// SignPod signs what the score depends on besides the cluster: the pod's
// GPU request.
func (pl *InferencePacking) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: "sluice.dev/InferencePacking.GPURequest()", Value: capacity.ShapeOf(pod).Scalar[pl.gpu]}}, nil
}

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// preScoreState says where production runs in this cycle.
type preScoreState struct {
	tree *fabric.Tree
	// prodNodes is indexed by the tree's node index.
	prodNodes  []bool
	prodLeaves map[*fabric.Domain]bool
	gpus       int64
}

// Clone returns the state: it is not changed after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore finds the nodes and leaves that run production: one pass over
// the nodes per pod, rescanning the pods only of nodes that changed.
func (pl *InferencePacking) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	tree, err := pl.tracker.Tree()
	if err != nil {
		return fwk.AsStatus(err)
	}
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(err)
	}
	s := &preScoreState{tree: tree, prodNodes: make([]bool, tree.NumNodes()), prodLeaves: map[*fabric.Domain]bool{},
		gpus: capacity.ShapeOf(pod).Scalar[pl.gpu]}
	leaf := min(1, tree.RootLevel())
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.marks == nil || len(pl.marks) > len(all) {
		// First cycle, or nodes were removed: start over.
		pl.marks = make(map[string]mark, len(all))
	}
	for _, ni := range all {
		n := ni.Node()
		if n == nil || pl.classes.IsOverflowNode(n) {
			continue
		}
		m, ok := pl.marks[n.Name]
		if !ok || m.generation != ni.GetGeneration() {
			m = mark{generation: ni.GetGeneration(), production: pl.runsProduction(ni)}
			pl.marks[n.Name] = m
		}
		if !m.production {
			continue
		}
		if i, ok := tree.NodeIndex(n.Name); ok {
			s.prodNodes[i] = true
			s.prodLeaves[tree.Ancestor(i, leaf)] = true
		}
	}
	state.Write(preScoreStateKey, s)
	return nil
}

func (pl *InferencePacking) runsProduction(ni fwk.NodeInfo) bool {
	for _, p := range ni.GetPods() {
		if pl.classes.IsProduction(p.GetPod()) {
			return true
		}
	}
	return false
}

// Score ranks nodes for production:
//
//	overflow node:  0
//	physical node:  40 + 30 if it runs production
//	                   + 20 if its leaf switch runs production
//	                   + 10 x its GPU allocation after this pod
//
// Worked example, a 1-GPU pod and 8-GPU nodes: a node running production
// with 4 GPUs taken scores 40+30+20+10*5/8 = 96; an empty node in a leaf
// that runs production scores 40+20+10*1/8 = 61; an empty node in an empty
// leaf 40+10*1/8 = 41; the overflow node 0. With the plugin's weight (10 in
// the shipped profile) an overflow node trails every physical node by 400,
// more than the other score plugins together give, so production overflows
// only when no physical node fits it.
func (pl *InferencePacking) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	s := data.(*preScoreState)
	node := nodeInfo.Node()
	if pl.classes.IsOverflowNode(node) {
		return 0, nil
	}
	score := int64(physicalFloor)
	if i, ok := s.tree.NodeIndex(node.Name); ok {
		if s.prodNodes[i] {
			score += nodeTerm
		}
		if s.prodLeaves[s.tree.Ancestor(i, min(1, s.tree.RootLevel()))] {
			score += leafTerm
		}
	}
	if total := nodeInfo.GetAllocatable().GetScalarResources()[pl.gpu]; total > 0 {
		used := nodeInfo.GetRequested().GetScalarResources()[pl.gpu] + s.gpus
		score += packTerm * min(used, total) / total
	}
	return score, nil
}

// ScoreExtensions returns nil: scores are already in [0, 100].
func (pl *InferencePacking) ScoreExtensions() fwk.ScoreExtensions { return nil }
