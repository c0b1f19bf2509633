// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package kubectlsluice

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// Why says why a pod or a PodGroup ("podgroup/<name>") is where it is:
// its conditions (sluice's placement, claim and overflow conditions among
// them) and the Events sluice and the scheduler recorded, with their
// numbers; for a pod of a gang, its PodGroup's too.
func (o *Options) Why(ctx context.Context, target string) error {
	if name, ok := strings.CutPrefix(target, "podgroup/"); ok {
		return o.whyPodGroup(ctx, name)
	}
	name := strings.TrimPrefix(strings.TrimPrefix(target, "pod/"), "pods/")
	pod, err := o.Client.CoreV1().Pods(o.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", o.Namespace, name, err)
	}
	where := "not bound"
	if pod.Spec.NodeName != "" {
		where = "on node " + pod.Spec.NodeName
	}
	fmt.Fprintf(o.Out, "Pod %s/%s: %s, %s, scheduler %s, priority class %q (%s)\n", pod.Namespace, pod.Name, pod.Status.Phase, where,
		pod.Spec.SchedulerName, pod.Spec.PriorityClassName, o.Classes.ClassOf(pod))
	if q := pod.Spec.Containers; len(q) > 0 {
		var gpus int64
		for _, c := range q {
			r := c.Resources.Requests[o.GPU]
			gpus += r.Value()
		}
		fmt.Fprintf(o.Out, "Requests %d %s\n", gpus, o.GPU)
	}
	fmt.Fprintln(o.Out, "Conditions:")
	o.printPodConditions(pod.Status.Conditions)
	events, err := o.events(ctx, pod.Namespace, "Pod", pod.Name)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "Events:")
	o.printEvents(o.Out, events)
	if key, ok := gang.KeyOf(pod); ok {
		fmt.Fprintf(o.Out, "\nIt belongs to the gang %s.\n", key)
		return o.whyPodGroup(ctx, key.Name)
	}
	return nil
}

func (o *Options) printPodConditions(conds []v1.PodCondition) {
	if len(conds) == 0 {
		fmt.Fprintln(o.Out, "  (none)")
		return
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, since(o, c.LastTransitionTime), oneLine(c.Message))
	}
	_ = tw.Flush()
}

func since(o *Options, t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(o.Now().Sub(t.Time))
}

// whyPodGroup reads the PodGroup from either API (scheduler-plugins'
// first), its conditions and Events, and where its members are.
func (o *Options) whyPodGroup(ctx context.Context, name string) error {
	var conds []metav1.Condition
	var minMember int32
	api := gang.Label
	u, err := o.Dynamic.Resource(v1alpha1.Resource).Namespace(o.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		pg := &v1alpha1.PodGroup{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg); err != nil {
			return fmt.Errorf("PodGroup %s/%s: %w", o.Namespace, name, err)
		}
		conds, minMember = pg.Status.Conditions, pg.Spec.MinMember
	default:
		native, nerr := o.Client.SchedulingV1beta1().PodGroups(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		if nerr != nil {
			if apierrors.IsNotFound(nerr) || apierrors.IsNotFound(err) {
				return fmt.Errorf("no PodGroup %s/%s in either API (%s: %v; %s: %v)", o.Namespace, name, gang.Label, err, gang.Native, nerr)
			}
			return nerr
		}
		api, conds = gang.Native, native.Status.Conditions
		if p := native.Spec.SchedulingPolicy.Gang; p != nil {
			minMember = p.MinCount
		}
	}
	pods, err := o.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var members, bound []string
	nodes := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if k, ok := gang.KeyOf(p); ok && k.Name == name && k.API == api {
			members = append(members, p.Name)
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name)
				nodes[p.Spec.NodeName] = true
			}
		}
	}
	sort.Strings(members)
	fmt.Fprintf(o.Out, "PodGroup %s/%s (%s): minMember %d, %d members, %d bound on %d nodes\n", o.Namespace, name, api, minMember, len(members), len(bound), len(nodes))
	fmt.Fprintln(o.Out, "Conditions:")
	if len(conds) == 0 {
		fmt.Fprintln(o.Out, "  (none)")
	} else {
		tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range conds {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, since(o, c.LastTransitionTime), oneLine(c.Message))
		}
		_ = tw.Flush()
	}
	events, err := o.events(ctx, o.Namespace, "PodGroup", name)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "Events:")
	o.printEvents(o.Out, events)
	return nil
}
