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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/internal/localcluster"
)

// SharedLabel marks a namespace or node that a package's tests share on
// purpose (created once, e.g. the sluice-system namespace of the shipped
// RBAC): the leftover check at the start of each test ignores it.
const SharedLabel = "test.sluice.dev/shared"

// systemNamespaces exist in every cluster.
var systemNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// CleanupTimeout bounds how long a test's cleanup waits for its namespace
// to be gone.
const CleanupTimeout = 40 * time.Second

// record is what the harness knows about one running test: the namespaces
// and nodes it created, and where its part of the component log starts.
type record struct {
	mu         sync.Mutex
	client     kubernetes.Interface
	namespaces []string
	nodes      []nodeRef
	logOffset  int64
	told       bool
}

// records maps each running test to its record (test helper state).
var records sync.Map // testing.TB -> *record

func recordOf(t testing.TB) *record {
	if r, ok := records.Load(t); ok {
		return r.(*record)
	}
	r := &record{logOffset: logSize()}
	if actual, loaded := records.LoadOrStore(t, r); loaded {
		return actual.(*record)
	}
	t.Cleanup(func() { records.Delete(t) })
	return r
}

func (r *record) addNamespace(cs kubernetes.Interface, ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.client = cs
	r.namespaces = append(r.namespaces, ns)
}

// nodeRef is a node of a test, in the cluster that client reaches (the
// package's cluster, or its remote one).
type nodeRef struct {
	client kubernetes.Interface
	name   string
}

func (r *record) addNode(cs kubernetes.Interface, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil {
		r.client = cs
	}
	r.nodes = append(r.nodes, nodeRef{client: cs, name: node})
}

func (r *record) owns(namespace string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ns := range r.namespaces {
		if ns == namespace {
			return true
		}
	}
	return false
}

func (r *record) ownsNode(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		if n.name == node {
			return true
		}
	}
	return false
}

// NewNamespace creates a namespace for one test and, when the test ends,
// deletes it and waits until the namespace controller has removed it with
// everything in it, so nothing of this test reaches the next. It first
// checks that no earlier test left anything behind (see CheckNoLeftovers).
func NewNamespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	CheckNoLeftovers(t, cs)
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("%s-%s", strings.Trim(base, "-"), rand.String(5))
	_, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: localcluster.TenantLabels()}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	OwnNamespace(t, cs, name)
	return name
}

// OwnNamespace makes an existing namespace the test's: it is told about on
// failure, and deleted (and waited for) when the test ends.
func OwnNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	r := recordOf(t)
	r.addNamespace(cs, name)
	t.Cleanup(func() {
		tellStory(t)
		deleteNamespace(t, cs, name)
	})
}

// deleteNamespace deletes a namespace and waits until it is gone; what is
// left in it after CleanupTimeout is named in the failure.
func deleteNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	ctx := context.Background()
	err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("deleting namespace %s: %v", name, err)
		return
	}
	// The test is over: its pods need no graceful end, and pods on nodes
	// whose kubelet is gone (an overflow node the test stopped) would
	// never get one. The namespace is terminating, so nothing recreates
	// them.
	_ = cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, CleanupTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		why := strings.Join(workloadsIn(ctx, cs, name), ", ")
		if ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
			for _, c := range ns.Status.Conditions {
				if c.Status == v1.ConditionTrue {
					why += fmt.Sprintf("; %s: %s", c.Type, c.Message)
				}
			}
		}
		t.Errorf("namespace %s still exists %v after its deletion; left in it: %s", name, CleanupTimeout, why)
	}
}

// SharedNamespace creates (once per package; later calls find it) a
// namespace that the package's tests share, labeled SharedLabel so that
// the leftover check ignores it.
func SharedNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: labels.Merge(localcluster.TenantLabels(), map[string]string{SharedLabel: "true"}),
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating shared namespace %s: %v", name, err)
	}
}

// CreateNodes creates nodes (status included, as a kubelet registers them)
// and deletes them when the test ends.
func CreateNodes(t testing.TB, cs kubernetes.Interface, nodes ...*v1.Node) {
	t.Helper()
	ctx := context.Background()
	r := recordOf(t)
	for _, n := range nodes {
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating node %s: %v", n.Name, err)
		}
		r.addNode(cs, n.Name)
		name := n.Name
		t.Cleanup(func() {
			tellStory(t)
			err := cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", name, err)
			}
		})
		// Some apiserver versions drop status on create; make sure it is
		// set (a node simulator may be writing it too).
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			created.Status = n.Status
			_, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if fresh, gerr := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); gerr == nil {
					created = fresh
				}
			}
			return err
		})
		if err != nil {
			t.Fatalf("setting status of node %s: %v", n.Name, err)
		}
	}
}

// CheckNoLeftovers fails the test at once when an earlier test left
// something behind that could reach this one: a namespace that is not
// shared, workloads or pods outside this test's namespaces, or nodes this
// test did not create. NewNamespace calls it; the message names every
// leftover.
func CheckNoLeftovers(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	if left := Leftovers(context.Background(), t, cs); len(left) > 0 {
		t.Fatalf("left behind by an earlier test (a test must delete what it creates; harness.NewNamespace and "+
			"harness.CreateNodes do): %s", strings.Join(left, "; "))
	}
}

// Leftovers lists what CheckNoLeftovers objects to.
func Leftovers(ctx context.Context, t testing.TB, cs kubernetes.Interface) []string {
	r := recordOf(t)
	var left []string
	namespaces, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("cannot list namespaces: %v", err)}
	}
	for _, ns := range namespaces.Items {
		if r.owns(ns.Name) {
			continue
		}
		if !systemNamespaces[ns.Name] && ns.Labels[SharedLabel] != "true" {
			what := "Namespace " + ns.Name
			if ns.DeletionTimestamp != nil {
				what += " (Terminating)"
			}
			left = append(left, what)
		}
		left = append(left, workloadsIn(ctx, cs, ns.Name)...)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(left, fmt.Sprintf("cannot list nodes: %v", err))
	}
	for _, n := range nodes.Items {
		if n.Labels[SharedLabel] != "true" && !r.ownsNode(n.Name) {
			left = append(left, "Node "+n.Name)
		}
	}
	sort.Strings(left)
	return left
}

// workloadsIn names the workloads and live pods in a namespace.
func workloadsIn(ctx context.Context, cs kubernetes.Interface, ns string) []string {
	var out []string
	if list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range list.Items {
			out = append(out, "Deployment "+ns+"/"+o.Name)
		}
	}
	if list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range list.Items {
			out = append(out, "ReplicaSet "+ns+"/"+o.Name)
		}
	}
	if list, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range list.Items {
			out = append(out, "StatefulSet "+ns+"/"+o.Name)
		}
	}
	if list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			where := "pending"
			if p.Spec.NodeName != "" {
				where = "on " + p.Spec.NodeName
			}
			out = append(out, fmt.Sprintf("Pod %s/%s (%s)", ns, p.Name, where))
		}
	}
	return out
}
