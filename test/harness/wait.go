// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DefaultTimeout bounds every wait of the harness. It is generous: waits
// return as soon as their condition holds, and CI machines are slow.
const DefaultTimeout = 60 * time.Second

// Eventually polls cond every 100 ms until it returns true, and fails the
// test with describe()'s text when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, cond func(context.Context) (bool, error), describe func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("after %v: %s (%v)", timeout, describe(), err)
	}
}

// WaitForPodsBound waits until every named pod in ns is bound to a node and
// returns pod name -> node name. The failure message lists the pods still
// pending with the scheduler's reason.
func WaitForPodsBound(t testing.TB, cs kubernetes.Interface, ns string, names ...string) map[string]string {
	t.Helper()
	bound := map[string]string{}
	var pending []*v1.Pod
	Eventually(t, DefaultTimeout, func(ctx context.Context) (bool, error) {
		var now []*v1.Pod
		for _, name := range names {
			if _, ok := bound[name]; ok {
				continue
			}
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Spec.NodeName != "" {
				bound[name] = pod.Spec.NodeName
				continue
			}
			now = append(now, pod)
		}
		pending = now
		return len(pending) == 0, nil
	}, func() string { return "pods not bound: " + describePods(pending) })
	return bound
}

// WaitForPodsUnschedulable waits until the scheduler has reported every named
// pod unschedulable (PodScheduled=False, reason Unschedulable) and returns
// the condition messages by pod name. It fails if any of them gets bound.
func WaitForPodsUnschedulable(t testing.TB, cs kubernetes.Interface, ns string, names ...string) map[string]string {
	t.Helper()
	messages := map[string]string{}
	var waiting []*v1.Pod
	Eventually(t, DefaultTimeout, func(ctx context.Context) (bool, error) {
		var now []*v1.Pod
		defer func() { waiting = now }()
		for _, name := range names {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Spec.NodeName != "" {
				return false, fmt.Errorf("pod %s was bound to %s, want unschedulable", name, pod.Spec.NodeName)
			}
			if c := podScheduledCondition(pod); c != nil && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				messages[name] = c.Message
				continue
			}
			now = append(now, pod)
		}
		return len(now) == 0, nil
	}, func() string { return "pods not reported unschedulable: " + describePods(waiting) })
	return messages
}

// ExpectNeverBound fails the test if any of the named pods in ns is bound
// to a node at any moment from now until the test ends, or until the
// returned func is called (checked at every change of the pods, not by
// sampling). Pair it with a wait for the scheduler's decision (e.g. a
// FailedScheduling or NoOverflowClaim event), so the test knows the pods
// were considered.
func ExpectNeverBound(t testing.TB, cs kubernetes.Interface, ns string, names ...string) (stop func()) {
	t.Helper()
	watched := map[string]bool{}
	for _, n := range names {
		watched[n] = true
	}
	var violations Violations
	var mu sync.Mutex
	armed := true
	WatchPods(t, cs, ns, func(e PodEvent) {
		mu.Lock()
		defer mu.Unlock()
		if p := e.New; armed && p != nil && watched[p.Name] && p.Spec.NodeName != "" && (e.Old == nil || e.Old.Spec.NodeName == "") {
			violations.Addf("pod %s/%s was bound to %s; it must stay pending", ns, p.Name, p.Spec.NodeName)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			mu.Lock()
			armed = false
			mu.Unlock()
			violations.Check(t)
		})
	}
	t.Cleanup(stop)
	return stop
}

func podScheduledCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func describePods(pods []*v1.Pod) string {
	var parts []string
	for _, p := range pods {
		reason := "not yet attempted"
		if c := podScheduledCondition(p); c != nil {
			reason = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, reason))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// PodEvents returns "reason: message" of the events about a pod, oldest
// first.
func PodEvents(t testing.TB, cs kubernetes.Interface, ns, pod string) []string {
	t.Helper()
	return ObjectEvents(t, cs, ns, "Pod", pod)
}

// WaitForEvent waits until an event about the object (kind, name; any of
// the kind when name is "") contains every string in want, and returns its
// "reason: message".
func WaitForEvent(t testing.TB, cs kubernetes.Interface, ns, kind, name string, want ...string) string {
	t.Helper()
	var got []string
	var match string
	Eventually(t, DefaultTimeout, func(context.Context) (bool, error) {
		got = ObjectEvents(t, cs, ns, kind, name)
		for _, e := range got {
			all := true
			for _, w := range want {
				all = all && strings.Contains(e, w)
			}
			if all {
				match = e
				return true, nil
			}
		}
		return false, nil
	}, func() string {
		return fmt.Sprintf("no event on %s %s/%s contains %q; events: %q", kind, ns, name, want, got)
	})
	return match
}

// ObjectEvents returns "reason: message" of the events about an object
// (any object of the kind when name is ""), oldest first.
func ObjectEvents(t testing.TB, cs kubernetes.Interface, ns, kind, name string) []string {
	t.Helper()
	selector := "involvedObject.kind=" + kind
	if name != "" {
		selector += ",involvedObject.name=" + name
	}
	list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatalf("listing events of %s %s: %v", kind, name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].LastTimestamp.Before(&list.Items[j].LastTimestamp)
	})
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// WaitForPodsGone waits until the named pods in ns no longer exist.
func WaitForPodsGone(t testing.TB, cs kubernetes.Interface, ns string, names ...string) {
	t.Helper()
	var left []string
	Eventually(t, DefaultTimeout, func(ctx context.Context) (bool, error) {
		left = nil
		for _, name := range names {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				left = append(left, name)
			} else if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return len(left) == 0, nil
	}, func() string { return fmt.Sprintf("pods still there: %v", left) })
}
