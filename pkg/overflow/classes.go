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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// ResearchNamespaces and ProductionNamespaces select the namespaces
	// each class may be used in (the tenancy policy); a pod of a class
	// outside them is neither research nor production.
	ResearchNamespaces, ProductionNamespaces labels.Selector
	// Namespace reads a namespace's labels (found false: it does not
	// exist, or is not known yet, and so is in no class's namespaces). Nil
	// when both selectors select everything.
	Namespace func(name string) (labels.Set, bool)
}

// The namespace labels the shipped configuration's tenancy policy selects
// (manifests/scheduler-config.yaml, the chart's values), each "true".
const (
	ResearchNamespaceLabel   = "sluice.dev/research"
	ProductionNamespaceLabel = "sluice.dev/production"
)

// Settings that name the tenancy policy in what sluice says.
const (
	ResearchNamespacesSetting   = "overflow.researchNamespaces"
	ProductionNamespacesSetting = "overflow.productionNamespaces"
)

// ClassesFrom builds Classes from a plugin's overflow args; namespace
// reads a namespace's labels (see Classes.Namespace).
func ClassesFrom(cfg *config.OverflowConfig, namespace func(string) (labels.Set, bool)) (*Classes, error) {
	c, err := NewClasses(cfg.ResearchPriorityClasses, cfg.ProductionPriorityClasses, cfg.OverflowNodeSelector, cfg.OverflowTaintKey)
	if err != nil {
		return nil, err
	}
	if c.ResearchNamespaces, err = namespaceSelector(cfg.ResearchNamespaces); err != nil {
		return nil, fmt.Errorf("researchNamespaces: %w", err)
	}
	if c.ProductionNamespaces, err = namespaceSelector(cfg.ProductionNamespaces); err != nil {
		return nil, fmt.Errorf("productionNamespaces: %w", err)
	}
	c.Namespace = namespace
	return c, nil
}

// namespaceSelector is everything for nil.
func namespaceSelector(sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// NewClasses builds Classes; selector is a label selector string such as
// "type=virtual-kubelet".
func NewClasses(research, production []string, selector, taintKey string) (*Classes, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("overflow node selector %q: %w", selector, err)
	}
	return &Classes{Research: sets.New(research...), Production: sets.New(production...), OverflowNodes: sel, OverflowTaintKey: taintKey,
		ResearchNamespaces: labels.Everything(), ProductionNamespaces: labels.Everything()}, nil
}

// IsResearch reports whether the pod is research: of a research
// PriorityClass, in a namespace research may use.
func (c *Classes) IsResearch(pod *v1.Pod) bool {
	return c.Research.Has(pod.Spec.PriorityClassName) && c.allows(c.ResearchNamespaces, pod.Namespace)
}

// IsProduction reports whether the pod is production: of a production
// PriorityClass, in a namespace production may use.
func (c *Classes) IsProduction(pod *v1.Pod) bool {
	return c.Production.Has(pod.Spec.PriorityClassName) && c.allows(c.ProductionNamespaces, pod.Namespace)
}

// Refused names the setting that keeps a pod of a research or production
// PriorityClass out of its class (its namespace is not selected), or is
// empty.
func (c *Classes) Refused(pod *v1.Pod) string {
	switch class := pod.Spec.PriorityClassName; {
	case c.Research.Has(class) && !c.allows(c.ResearchNamespaces, pod.Namespace):
		return ResearchNamespacesSetting
	case c.Production.Has(class) && !c.allows(c.ProductionNamespaces, pod.Namespace):
		return ProductionNamespacesSetting
	}
	return ""
}

// LeftResearch reports whether a pod of a research class is in a
// namespace known to be outside the research namespaces (one not known
// yet is not taken as left).
func (c *Classes) LeftResearch(pod *v1.Pod) bool {
	if !c.Research.Has(pod.Spec.PriorityClassName) || c.ResearchNamespaces == nil || c.ResearchNamespaces.Empty() || c.Namespace == nil {
		return false
	}
	set, ok := c.Namespace(pod.Namespace)
	return ok && !c.ResearchNamespaces.Matches(set)
}

// allows reports whether sel selects the namespace; a namespace not known
// is selected only by a selector of everything (fail safe).
func (c *Classes) allows(sel labels.Selector, namespace string) bool {
	if sel == nil || sel.Empty() {
		return true
	}
	if c.Namespace == nil {
		return false
	}
	set, ok := c.Namespace(namespace)
	return ok && sel.Matches(set)
}

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

// Returnable reports whether a pod on an overflow node may be moved back
// to physical GPUs: of a production class, whatever its namespace (one
// whose namespace left the production namespaces comes home too), not
// opted out, not being deleted.
func (c *Classes) Returnable(pod *v1.Pod) bool {
	return c.Production.Has(pod.Spec.PriorityClassName) && !OptedOut(pod) && pod.DeletionTimestamp == nil
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
