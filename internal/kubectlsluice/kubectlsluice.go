// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package kubectlsluice is `kubectl sluice`: what sluice decided and
// holds, read from any cluster's API (Events, conditions, nodes, pods,
// ResearchClaims), never from sluice's memory.
//
//	kubectl sluice why <pod> | podgroup/<name>   sluice's decisions, in numbers
//	kubectl sluice fabric                        free and used GPUs per fabric leaf
//	kubectl sluice claims                        research claims: waves, victims left, ETA
//	kubectl sluice overflow                      production on overflow nodes: where, since when
package kubectlsluice

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-sched/sluice/pkg/overflow"
)

// Options are what every command reads.
type Options struct {
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string // "" for all, where a command lists
	Out       io.Writer
	Now       func() time.Time
	// Classes tells research from production and overflow nodes (the
	// scheduler's overflow args: the same PriorityClasses and selector).
	Classes *overflow.Classes
	// GPU is the GPU resource name.
	GPU v1.ResourceName
	// LevelLabels are the fabric's node labels, lowest (leaf) first.
	LevelLabels []string
}

func (o *Options) table() *tabwriter.Writer { return tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0) }

func (o *Options) nodesAndPods(ctx context.Context) ([]*v1.Node, []*v1.Pod, error) {
	nl, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	pl, err := o.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	nodes := make([]*v1.Node, len(nl.Items))
	for i := range nl.Items {
		nodes[i] = &nl.Items[i]
	}
	pods := make([]*v1.Pod, len(pl.Items))
	for i := range pl.Items {
		pods[i] = &pl.Items[i]
	}
	return nodes, pods, nil
}

// age is a duration as kubectl prints ages.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// events are the Events about one object, oldest first.
func (o *Options) events(ctx context.Context, namespace, kind, name string) ([]v1.Event, error) {
	sel := labels.Set{"involvedObject.name": name, "involvedObject.kind": kind}.AsSelector().String()
	list, err := o.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing events of %s %s/%s: %w", kind, namespace, name, err)
	}
	slices.SortStableFunc(list.Items, func(a, b v1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return list.Items, nil
}

func eventTime(e v1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
			return e.Series.LastObservedTime.Time
		}
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func (o *Options) printEvents(w io.Writer, events []v1.Event) {
	if len(events) == 0 {
		fmt.Fprintln(w, "  (no events)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tFROM\tMESSAGE")
	for _, e := range events {
		from := e.ReportingController
		if from == "" {
			from = e.Source.Component
		}
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		} else if e.Series != nil && e.Series.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Series.Count)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s%s\n", age(o.Now().Sub(eventTime(e))), e.Type, e.Reason, from, oneLine(e.Message), count)
	}
	_ = tw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
