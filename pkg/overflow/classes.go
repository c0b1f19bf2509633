// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package overflow is the domain logic of moving production to the
// overflow (virtual-kubelet) nodes and back: which pods are research and
// production, which nodes are overflow nodes and how much room they have,
// and which production pods to move so a research gang gets one fabric
// domain with the fewest evictions.
package overflow

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/sluice-sched/sluice/pkg/apis/config"
)

// Annotation lets a production pod opt out of overflow: with the value
// "never" it is never evicted to make room, nor moved back.
const (
	Annotation = "sluice.dev/overflow"
	Never      = "never"
)

// Classes tells research from production and overflow nodes from physical
// ones.
type Classes struct {
	Research   sets.Set[string]
	Production sets.Set[string]
	// OverflowNodes selects the overflow nodes by label.
	OverflowNodes labels.Selector
	// OverflowTaintKey is the taint overflow nodes carry; pods that
	// tolerate it may run there.
	OverflowTaintKey string
}

// ClassesFrom builds Classes from a plugin's overflow args.
func ClassesFrom(cfg *config.OverflowConfig) (*Classes, error) {
	return NewClasses(cfg.ResearchPriorityClasses, cfg.ProductionPriorityClasses, cfg.OverflowNodeSelector, cfg.OverflowTaintKey)
}

// NewClasses builds Classes; selector is a label selector string such as
// "type=virtual-kubelet".
func NewClasses(research, production []string, selector, taintKey string) (*Classes, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("overflow node selector %q: %w", selector, err)
	}
	return &Classes{Research: sets.New(research...), Production: sets.New(production...), OverflowNodes: sel, OverflowTaintKey: taintKey}, nil
}

// IsResearch reports whether the pod is research (by PriorityClass).
func (c *Classes) IsResearch(pod *v1.Pod) bool { return c.Research.Has(pod.Spec.PriorityClassName) }

// IsProduction reports whether the pod is production (by PriorityClass).
func (c *Classes) IsProduction(pod *v1.Pod) bool { return c.Production.Has(pod.Spec.PriorityClassName) }

// ClassOf names a pod's class: "research", "production" or "other".
func (c *Classes) ClassOf(pod *v1.Pod) string {
	switch {
	case c.IsResearch(pod):
		return "research"
	case c.IsProduction(pod):
		return "production"
	}
	return "other"
}

// IsOverflowNode reports whether the node is an overflow node.
func (c *Classes) IsOverflowNode(node *v1.Node) bool {
	return node != nil && c.OverflowNodes.Matches(labels.Set(node.Labels))
}

// Eligible reports whether a production pod may be moved to an overflow
// node: it tolerates the overflow taint and has not opted out.
func (c *Classes) Eligible(pod *v1.Pod) bool {
	if !c.IsProduction(pod) || OptedOut(pod) || pod.DeletionTimestamp != nil {
		return false
	}
	return c.ToleratesOverflow(pod)
}

// OptedOut reports whether the pod's owners opted it out of overflow
// (sluice.dev/overflow: never, in any case, spaces around it ignored).
func OptedOut(pod *v1.Pod) bool {
	return strings.EqualFold(strings.TrimSpace(pod.Annotations[Annotation]), Never)
}

// ToleratesOverflow reports whether the pod tolerates the overflow taint:
// it may be bound to an overflow node.
func (c *Classes) ToleratesOverflow(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: c.OverflowTaintKey, Value: "sluice", Effect: v1.TaintEffectNoSchedule}
	return v1helper.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false)
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
