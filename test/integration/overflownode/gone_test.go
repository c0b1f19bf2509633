// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package overflownode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/overflownode"
	"github.com/sluice-sched/sluice/test/harness"
	"github.com/sluice-sched/sluice/test/providerserver"
)

// TestGoneProviderRetiredAtBudgetPace: a Deployment of 4 runs on the
// overflow node at provider a, under a PodDisruptionBudget of
// maxUnavailable 1. Provider a goes away (its server closes: no listing)
// for longer than providerFailureTimeoutSeconds. Its pods are evicted
// through the Eviction API as the budget allows, one at a time: each
// replacement (pinned to the node) starts at provider b and turns Ready
// before the next goes, so a watch never sees fewer than 3 of the 4 Ready
// and not being deleted. The node says so in a ProviderGone Event, and
// each pod in one of its own.
func TestGoneProviderRetiredAtBudgetPace(t *testing.T) {
	cp := harness.Shared(t)
	ns := harness.NewNamespace(t, cp.Client)
	name := "ovf-gone"
	deleteNodeAtEnd(t, cp, name)
	a := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "4"}, StartDelay: 200 * time.Millisecond})
	var closeA sync.Once
	defer closeA.Do(a.Close)
	b := providerserver.Start(providerserver.Options{Capacity: map[string]string{"nvidia.com/gpu": "8"}, StartDelay: 2 * time.Second})
	defer b.Close()
	startNodeWith(t, cp, name, func(c *overflownode.Config) { c.ProviderFailureTimeoutSeconds = ptr.To[int64](3) },
		overflownode.ProviderConfig{Name: "a", Type: overflownode.TypeHTTP, Priority: 0, HTTP: &overflownode.HTTPProvider{URL: a.URL}},
		overflownode.ProviderConfig{Name: "b", Type: overflownode.TypeHTTP, Priority: 1, HTTP: &overflownode.HTTPProvider{URL: b.URL}})

	const replicas = 4
	d := harness.InferenceDeployment(ns, "llm", replicas, 1)
	d.Spec.Template.Spec.NodeName = name
	d.Spec.Template.Spec.SchedulerName = ""
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	harness.CreateDeployment(t, cp, d, harness.PDB(ns, "llm", intstr.FromInt32(1)))
	readyAt := func(provider string) int {
		n := 0
		for _, p := range homePods(t, cp, ns, "llm") {
			if ready(&p) && p.DeletionTimestamp == nil && remoteProvider(&p) == provider {
				n++
			}
		}
		return n
	}
	harness.Eventually(t, 60*time.Second, func(context.Context) (bool, error) {
		return readyAt("a") == replicas, nil
	}, func() string {
		return fmt.Sprintf("%d pods Ready at provider a: %s", replicas, describe(homePods(t, cp, ns, "llm")))
	})

	// From now on: never fewer than replicas-1 Ready and not deleting.
	var mu sync.Mutex
	serving := map[string]bool{}
	for _, p := range homePods(t, cp, ns, "llm") {
		serving[p.Name] = true
	}
	var violations harness.Violations
	harness.WatchPods(t, cp.Client, ns, func(e harness.PodEvent) {
		mu.Lock()
		defer mu.Unlock()
		p := e.Pod()
		serving[p.Name] = e.New != nil && e.New.DeletionTimestamp == nil && ready(e.New)
		n := 0
		for _, ok := range serving {
			if ok {
				n++
			}
		}
		if n < replicas-1 {
			violations.Addf("%d of %d pods Ready and not being deleted (after %s), the budget allows 1 unavailable", n, replicas, p.Name)
		}
	})

	closeA.Do(a.Close)
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, error) {
		return readyAt("b") == replicas && len(homePods(t, cp, ns, "llm")) == replicas, nil
	}, func() string {
		return fmt.Sprintf("%d pods Ready at provider b: %s", replicas, describe(homePods(t, cp, ns, "llm")))
	})
	violations.Check(t)
	var got []string
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		got = harness.ObjectEvents(t, cp.Client, "", "Node", name)
		return strings.Contains(strings.Join(got, "\n"), overflownode.ReasonProviderGone+": provider a could not be listed for"), nil
	}, func() string { return fmt.Sprintf("a ProviderGone Event on node %s naming provider a: %q", name, got) })
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		got = harness.ObjectEvents(t, cp.Client, ns, "Pod", "")
		return strings.Count(strings.Join(got, "\n"), ": evicted, as PodDisruptionBudget llm allows") == replicas, nil
	}, func() string {
		return fmt.Sprintf("a ProviderGone Event on each of the %d pods, evicted as PodDisruptionBudget llm allows: %q", replicas, got)
	})
}

// remoteProvider is the provider a pod's overflow condition names.
func remoteProvider(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == overflownode.RemoteCondition {
			return c.Reason
		}
	}
	return ""
}
