// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package kubectlsluice

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// Claims lists the research claims: phase, victims moved of all, moving
// (evicted, replacement not Ready), left, waves, age, time since the last
// progress, an ETA at the pace so far, and the claim's own message.
func (o *Options) Claims(ctx context.Context) error {
	list, err := o.Dynamic.Resource(v1alpha1.Resource).Namespace(o.Namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintln(o.Out, "No research claims: the ResearchClaim API is not installed (charts/sluice/crds).")
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing research claims: %w", err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(o.Out, "No research claims.")
		return nil
	}
	now := o.Now()
	tw := o.table()
	fmt.Fprintln(tw, "NAMESPACE\tCLAIM\tFOR\tDOMAIN\tPHASE\tMOVED\tMOVING\tLEFT\tWAVES\tAGE\tSTALLED\tETA\tMESSAGE")
	// A claim recorded in several ResearchClaims is one row: its first
	// record's, with every record's victims counted.
	var firsts []*v1alpha1.ResearchClaim
	later := map[string][]*v1alpha1.ResearchClaim{}
	for i := range list.Items {
		c, err := v1alpha1.FromUnstructured(list.Items[i].Object)
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t\t\tunreadable\t\t\t\t\t\t\t\t%v\n", list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
			continue
		}
		if name, first := c.FirstRecord(); !first {
			later[c.Namespace+"/"+name] = append(later[c.Namespace+"/"+name], c)
			continue
		}
		firsts = append(firsts, c)
	}
	for _, c := range firsts {
		records := append([]*v1alpha1.ResearchClaim{c}, later[c.Namespace+"/"+c.Name]...)
		victims, moved, evicted := 0, 0, 0
		for _, r := range records {
			victims, moved, evicted = victims+len(r.Spec.Victims), moved+len(r.Status.Replaced), evicted+len(r.Status.Evicted)
		}
		phase := v1alpha1.ClaimPhase(records)
		moving := max(evicted-moved, 0)
		left := max(victims-moved-moving, 0)
		elapsed := now.Sub(c.CreationTimestamp.Time)
		stalled := "-"
		if !c.Status.ProgressTime.IsZero() && phase != v1alpha1.PhaseFreed && phase != v1alpha1.PhaseGivenUp {
			stalled = age(now.Sub(c.Status.ProgressTime.Time))
		}
		eta := "-"
		switch {
		case phase == v1alpha1.PhaseFreed:
			eta = "freed"
		case phase == v1alpha1.PhaseGivenUp:
			eta = "given up"
		case moved > 0 && elapsed > 0:
			eta = age(time.Duration(float64(elapsed) / float64(moved) * float64(victims-moved)))
		}
		msg := oneLine(c.Status.Message)
		if len(records) > 1 || c.Spec.Records > 1 {
			msg = fmt.Sprintf("[%d of %d records] %s", len(records), max(c.Spec.Records, 1), msg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Spec.Key, c.Spec.Domain, phase,
			moved, victims, moving, left, c.Status.Rounds, age(elapsed), stalled, eta, msg)
	}
	return tw.Flush()
}

// Overflow lists the pods on overflow nodes: node, the provider that runs
// each (the overflow node's condition on the pod), its GPUs, whether it is
// Ready, and since when it runs there; then the totals per provider.
func (o *Options) Overflow(ctx context.Context) error {
	nodes, pods, err := o.nodesAndPods(ctx)
	if err != nil {
		return err
	}
	overflowNodes := map[string]bool{}
	for _, n := range nodes {
		if o.Classes.IsOverflowNode(n) {
			overflowNodes[n.Name] = true
		}
	}
	if len(overflowNodes) == 0 {
		fmt.Fprintln(o.Out, "No overflow nodes.")
		return nil
	}
	type row struct {
		ns, name, node, provider, class, ready, since string
		gpus                                          int64
	}
	var rows []row
	perProvider := map[string][2]int64{}
	now := o.Now()
	for _, p := range pods {
		if !overflowNodes[p.Spec.NodeName] || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if o.Namespace != "" && p.Namespace != o.Namespace {
			continue
		}
		r := row{ns: p.Namespace, name: p.Name, node: p.Spec.NodeName, provider: "-", class: o.Classes.ClassOf(p), ready: "no", since: "-"}
		for _, c := range p.Status.Conditions {
			switch c.Type {
			case offer.ProviderCondition:
				if c.Status == v1.ConditionTrue {
					r.provider = c.Reason
					r.since = age(now.Sub(c.LastTransitionTime.Time))
				}
			case v1.PodReady:
				if c.Status == v1.ConditionTrue {
					r.ready = "yes"
				}
			}
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[o.GPU]
			r.gpus += q.Value()
		}
		t := perProvider[r.provider]
		perProvider[r.provider] = [2]int64{t[0] + 1, t[1] + r.gpus}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		fmt.Fprintf(o.Out, "Nothing runs on the %d overflow node(s).\n", len(overflowNodes))
		return nil
	}
	slices.SortFunc(rows, func(a, b row) int {
		return strings.Compare(a.provider+"/"+a.ns+"/"+a.name, b.provider+"/"+b.ns+"/"+b.name)
	})
	tw := o.table()
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tCLASS\tNODE\tPROVIDER\tGPUS\tREADY\tSINCE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ns, r.name, r.class, r.node, r.provider, r.gpus, r.ready, r.since)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	providers := make([]string, 0, len(perProvider))
	for p := range perProvider {
		providers = append(providers, p)
	}
	slices.Sort(providers)
	for _, p := range providers {
		t := perProvider[p]
		fmt.Fprintf(o.Out, "Provider %s: %d pods, %d %s.\n", p, t[0], t[1], o.GPU)
	}
	return nil
}
