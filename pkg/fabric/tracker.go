// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabric

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Source turns Kubernetes nodes into fabric nodes: which switch each node
// hangs off at every level.
type Source interface {
	// Levels names the switch levels, lowest first.
	Levels() []string
	// Switches returns node's switch per level ("" when unknown).
	Switches(node *v1.Node) []string
	// Relevant reports whether a change from old to new can change the tree
	// (a label the source reads changed).
	Relevant(old, new *v1.Node) bool
}

// Versioned is a Source whose answers change without node events (e.g. it
// reads a file): the tracker rebuilds the tree when Version changes.
type Versioned interface {
	Version() string
}

// LabelSource reads each level's switch from a node label.
type LabelSource struct {
	levels []string
	keys   []string
}

// NewLabelSource reads level i from the node label keys[i].
func NewLabelSource(levels, keys []string) (*LabelSource, error) {
	if len(levels) != len(keys) || len(levels) == 0 {
		return nil, fmt.Errorf("fabric: %d levels and %d label keys", len(levels), len(keys))
	}
	return &LabelSource{levels: levels, keys: keys}, nil
}

// Levels names the switch levels.
func (s *LabelSource) Levels() []string { return s.levels }

// Switches reads the node's labels.
func (s *LabelSource) Switches(node *v1.Node) []string {
	out := make([]string, len(s.keys))
	for i, k := range s.keys {
		out[i] = node.Labels[k]
	}
	return out
}

// Relevant reports whether a fabric label changed.
func (s *LabelSource) Relevant(old, new *v1.Node) bool {
	for _, k := range s.keys {
		if old.Labels[k] != new.Labels[k] {
			return true
		}
	}
	return false
}

// Tracker keeps the tree of the current nodes. Node events only mark it
// stale; the tree is rebuilt on the next Tree call, so a burst of node
// changes costs one rebuild, and scheduling cycles between changes reuse it.
type Tracker struct {
	source Source
	lister corelisters.NodeLister

	mu            sync.Mutex
	tree          *Tree
	stale         bool
	sourceVersion string
	// Builds counts rebuilds, for tests and metrics.
	builds int
}

// NewTracker watches nodes through the informer (which must not have
// started yet, or the tracker misses nothing only because Tree rebuilds on
// first use).
func NewTracker(source Source, informer cache.SharedIndexInformer) (*Tracker, error) {
	t := &Tracker{source: source, lister: corelisters.NewNodeLister(informer.GetIndexer()), stale: true}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.markStale() },
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Node)
			cur, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || source.Relevant(old, cur) {
				t.markStale()
			}
		},
		DeleteFunc: func(any) { t.markStale() },
	})
	return t, err
}

func (t *Tracker) markStale() {
	t.mu.Lock()
	t.stale = true
	t.mu.Unlock()
}

// Tree returns the tree of the current nodes.
func (t *Tracker) Tree() (*Tree, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	version := ""
	if v, ok := t.source.(Versioned); ok {
		version = v.Version()
	}
	if !t.stale && t.tree != nil && version == t.sourceVersion {
		return t.tree, nil
	}
	nodes, err := t.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	fnodes := make([]Node, len(nodes))
	for i, n := range nodes {
		fnodes[i] = Node{Name: n.Name, Switches: t.source.Switches(n)}
	}
	tree, err := Build(t.source.Levels(), fnodes)
	if err != nil {
		return nil, err
	}
	t.tree, t.stale, t.sourceVersion = tree, false, version
	t.builds++
	return tree, nil
}

// Builds is the number of times the tree was built.
func (t *Tracker) Builds() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.builds
}
