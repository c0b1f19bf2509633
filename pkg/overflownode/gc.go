// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-sched/sluice/pkg/overflownode/provider"
)

// Orphan is a remote workload that no pod of the home cluster runs any
// more: what a running node collects on its own, and what nobody collects
// for a node that was removed, renamed, or lost its configuration.
type Orphan struct {
	Provider string
	// Node is the overflow node that created it.
	Node string
	ID   string
	Pod  provider.PodRef
	// Why it is an orphan, for people.
	Why string
}

// FindOrphans lists the workloads of each of nodes (overflow node names,
// cfg's own first if wanted) at every provider of cfg, and returns those
// whose home pod is gone, is another pod now, is bound elsewhere or has
// ended; a warm instance not adopted, those whose victim is gone. Only
// workloads carrying one of these node names are looked at: another
// node's are never touched. A provider that cannot be listed is named in
// the error; the others are still looked at.
func FindOrphans(ctx context.Context, client kubernetes.Interface, cfg *Config, nodes []string) ([]Orphan, error) {
	var out []Orphan
	var errs []error
	for _, node := range nodes {
		c := *cfg
		c.NodeName = node
		members, err := Providers(&c)
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			lctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout())
			listed, err := m.Provider.List(lctx)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("provider %s, node %s: %w", m.Config.Name, node, err))
				continue
			}
			for _, w := range listed {
				if w.Validate() != nil || w.Node != node {
					continue
				}
				why, err := orphaned(ctx, client, &w, node)
				if err != nil {
					errs = append(errs, fmt.Errorf("provider %s, workload %s: %w", m.Config.Name, w.ID, err))
					continue
				}
				if why != "" {
					out = append(out, Orphan{Provider: m.Config.Name, Node: node, ID: w.ID, Pod: w.Pod, Why: why})
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

// orphaned says why no home pod runs w any more, or "" when one does. An
// error reading the pod is returned, never taken for its absence.
func orphaned(ctx context.Context, client kubernetes.Interface, w *provider.Workload, node string) (string, error) {
	pod, err := client.CoreV1().Pods(w.Pod.Namespace).Get(ctx, w.Pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "its pod is gone", nil
	case err != nil:
		return "", err
	case pod.UID != w.Pod.UID:
		return "its pod is gone (another pod has its name)", nil
	case w.Unadopted():
		// A warm instance: its pod is the victim it stands in for,
		// wherever that runs; the running node decides when it goes.
		return "", nil
	case pod.Spec.NodeName != node:
		return fmt.Sprintf("its pod is bound to %q, not %s", pod.Spec.NodeName, node), nil
	case terminal(pod):
		return "its pod has ended (" + string(pod.Status.Phase) + ")", nil
	}
	return "", nil
}

// DeleteOrphans deletes orphans at their providers, as found for cfg; it
// returns how many were deleted and an error naming each that was not.
func DeleteOrphans(ctx context.Context, cfg *Config, orphans []Orphan) (int, error) {
	members := map[string]map[string]*Member{} // node -> provider -> member
	deleted := 0
	var errs []error
	for _, o := range orphans {
		if members[o.Node] == nil {
			c := *cfg
			c.NodeName = o.Node
			ms, err := Providers(&c)
			if err != nil {
				return deleted, err
			}
			members[o.Node] = map[string]*Member{}
			for _, m := range ms {
				members[o.Node][m.Config.Name] = m
			}
		}
		m := members[o.Node][o.Provider]
		if m == nil {
			errs = append(errs, fmt.Errorf("workload %s: provider %s is not configured", o.ID, o.Provider))
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout())
		err := m.Provider.Delete(dctx, o.ID)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting workload %s at provider %s: %w", o.ID, o.Provider, err))
			continue
		}
		deleted++
	}
	return deleted, errors.Join(errs...)
}
