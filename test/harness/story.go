// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Limits of a failing test's story.
const (
	storyEvents   = 40
	storyLogLines = 200
)

// logFile is the package's component log (empty when logs go to stderr).
var (
	logMu   sync.Mutex
	logPath string
)

func setLogPath(p string) {
	logMu.Lock()
	logPath = p
	logMu.Unlock()
}

// logSize is the component log's current size: where the next test's
// lines start.
func logSize() int64 {
	logMu.Lock()
	p := logPath
	logMu.Unlock()
	if p == "" {
		return 0
	}
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// tellStory prints, once, the story of a failed test: its pods (phase,
// node, scheduling condition), its nodes, the last events of its
// namespaces, and the component log lines written while it ran that name
// one of its namespaces or nodes. Tests that passed tell nothing.
func tellStory(t testing.TB) {
	if !t.Failed() {
		return
	}
	r := recordOf(t)
	r.mu.Lock()
	if r.told || r.client == nil {
		r.mu.Unlock()
		return
	}
	r.told = true
	cs, namespaces, nodes, offset := r.client, append([]string(nil), r.namespaces...), append([]nodeRef(nil), r.nodes...), r.logOffset
	r.mu.Unlock()
	var nodeNames []string
	for _, n := range nodes {
		nodeNames = append(nodeNames, n.name)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "=== story of %s (namespaces %s; nodes %s)\n", t.Name(), strings.Join(namespaces, ", "), summarize(nodeNames, 12))
	ctx := context.Background()
	for _, ns := range namespaces {
		writePods(ctx, &b, cs, ns)
	}
	writeNodes(ctx, &b, nodes)
	for _, ns := range namespaces {
		writeEvents(ctx, &b, cs, ns)
	}
	writeLog(&b, offset, append(namespaces, nodeNames...))
	t.Log(b.String())
}

func summarize(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

func writePods(ctx context.Context, w io.Writer, cs kubernetes.Interface, ns string) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(w, "pods of %s: %v\n", ns, err)
		return
	}
	fmt.Fprintf(w, "--- %d pods in %s\n", len(list.Items), ns)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for _, p := range list.Items {
		node := p.Spec.NodeName
		if node == "" {
			node = "-"
			if p.Status.NominatedNodeName != "" {
				node = "- (nominated " + p.Status.NominatedNodeName + ")"
			}
		}
		state := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			state += ",Terminating"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				state += ",Ready"
			}
		}
		line := fmt.Sprintf("  %s %s on %s", p.Name, state, node)
		if c := podScheduledCondition(&p); c != nil && c.Status != v1.ConditionTrue {
			line += fmt.Sprintf(" [%s: %s]", c.Reason, c.Message)
		}
		fmt.Fprintln(w, line)
	}
}

func writeNodes(ctx context.Context, w io.Writer, nodes []nodeRef) {
	if len(nodes) == 0 {
		return
	}
	fmt.Fprintf(w, "--- %d nodes\n", len(nodes))
	for _, ref := range nodes {
		name := ref.name
		n, err := ref.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", name, err)
			continue
		}
		ready := "Ready=?"
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				ready = "Ready=" + string(c.Status)
			}
		}
		var extra []string
		if n.Spec.Unschedulable {
			extra = append(extra, "cordoned")
		}
		for _, taint := range n.Spec.Taints {
			extra = append(extra, "taint "+taint.ToString())
		}
		fmt.Fprintf(w, "  %s %s gpu=%s %s\n", name, ready, n.Status.Allocatable.Name(GPU, "").String(), strings.Join(extra, " "))
	}
}

func writeEvents(ctx context.Context, w io.Writer, cs kubernetes.Interface, ns string) {
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return eventTime(&items[i]).Before(eventTime(&items[j])) })
	if len(items) > storyEvents {
		fmt.Fprintf(w, "--- last %d of %d events in %s\n", storyEvents, len(items), ns)
		items = items[len(items)-storyEvents:]
	} else {
		fmt.Fprintf(w, "--- %d events in %s\n", len(items), ns)
	}
	for _, e := range items {
		fmt.Fprintf(w, "  %s %s/%s %s: %s\n", eventTime(&e).Format("15:04:05.000"), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e *v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// writeLog copies the component log lines written since offset that
// mention one of words (the test's namespaces and nodes), the last
// storyLogLines of them.
func writeLog(w io.Writer, offset int64, words []string) {
	logMu.Lock()
	p := logPath
	logMu.Unlock()
	if p == "" || len(words) == 0 {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	var lines []string
	total := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, word := range words {
			if strings.Contains(line, word) {
				total++
				lines = append(lines, line)
				if len(lines) > storyLogLines {
					lines = lines[1:]
				}
				break
			}
		}
	}
	fmt.Fprintf(w, "--- component log: %d lines of this test name its namespaces or nodes (last %d below; all in %s)\n", total, len(lines), p)
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}
