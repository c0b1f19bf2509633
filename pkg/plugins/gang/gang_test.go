// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package gang

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	"github.com/sluice-sched/sluice/pkg/apis/podgroup/v1alpha1"
	"github.com/sluice-sched/sluice/pkg/gang"
)

// handle is the part of the framework handle the plugin uses: pods
// waiting at Permit, and the queue's Activate.
type handle struct {
	fwk.Handle
	waiting   map[types.UID]*waitingPod
	activated [][]string
}

func (h *handle) IterateOverWaitingPods(f func(fwk.WaitingPod)) {
	for _, wp := range h.waiting {
		f(wp)
	}
}

func (h *handle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if wp, ok := h.waiting[uid]; ok {
		return wp
	}
	return nil
}

func (h *handle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	h.activated = append(h.activated, names)
}

// waitingPod is a pod held at Permit; it records Allow and Reject.
type waitingPod struct {
	pod      *v1.Pod
	allowed  bool
	rejected string
}

func (w *waitingPod) GetPod() *v1.Pod             { return w.pod }
func (w *waitingPod) GetPendingPlugins() []string { return []string{Name} }
func (w *waitingPod) Allow(string)                { w.allowed = true }
func (w *waitingPod) Reject(_, msg string) bool   { w.rejected = msg; return true }
func (w *waitingPod) Preempt(_, _ string) bool    { return true }
func (h *handle) wait(pod *v1.Pod, node string) *v1.Pod { // assumed on node, held at Permit
	p := pod.DeepCopy()
	p.Spec.NodeName = node
	h.waiting[p.UID] = &waitingPod{pod: p}
	return p
}

// gangs is a fake of the runtime's gangs: one label gang and its members.
type gangs struct {
	pg      *v1alpha1.PodGroup
	err     error
	members []*v1.Pod // bound ones have spec.nodeName
}

func (g *gangs) Get(key gang.Key) (*gang.Gang, error) {
	if g.pg == nil || key.Name != g.pg.Name {
		return nil, fmt.Errorf("gang %s: %w", key, gang.ErrNotFound)
	}
	out := &gang.Gang{Key: key, PodGroup: g.pg, MinMember: max(int(g.pg.Spec.MinMember), 1)}
	if t := g.pg.Spec.ScheduleTimeoutSeconds; t != nil {
		out.ScheduleTimeout = time.Duration(*t) * time.Second
	}
	return out, g.err
}

func (g *gangs) MembersOf(key gang.Key, s gang.Scheduler) (gang.Members, error) {
	var out gang.Members
	waiting := map[types.UID]*v1.Pod{}
	s.WaitingPods(func(p *v1.Pod) { waiting[p.UID] = p })
	for _, m := range g.members {
		switch {
		case waiting[m.UID] != nil:
			out.Placed = append(out.Placed, waiting[m.UID])
		case m.Spec.NodeName != "":
			out.Placed = append(out.Placed, m)
		default:
			out.Pending = append(out.Pending, m)
		}
	}
	return out, nil
}

// fixture is a Gang plugin over fakes, its clock at a fixed time.
type fixture struct {
	pl     *Gang
	handle *handle
	gangs  *gangs
	clock  *testingclock.FakeClock
	events *events.FakeRecorder
}

func newFixture(t *testing.T, minMember int32, timeoutSeconds *int32, members int) fixture {
	t.Helper()
	pg := &v1alpha1.PodGroup{}
	pg.Namespace, pg.Name, pg.UID = "ns", "g", "g-uid"
	pg.Spec.MinMember, pg.Spec.ScheduleTimeoutSeconds = minMember, timeoutSeconds
	g := &gangs{pg: pg}
	for i := range members {
		g.members = append(g.members, member(i))
	}
	h := &handle{waiting: map[types.UID]*waitingPod{}}
	rec := events.NewFakeRecorder(100)
	reporter, err := gang.NewReporter(t.Context(), fake.NewClientset(), nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	pl := &Gang{
		handle: h, args: &config.GangArgs{DefaultScheduleTimeoutSeconds: 60, RejectedGangBackoffSeconds: 10},
		clock: clk, gangs: g, served: func() bool { return true }, reporter: reporter,
		scheduler: fakeScheduler{h}, backoff: map[gang.Key]time.Time{},
	}
	return fixture{pl: pl, handle: h, gangs: g, clock: clk, events: rec}
}

type fakeScheduler struct{ h *handle }

func (s fakeScheduler) WaitingPods(visit func(*v1.Pod)) {
	for _, wp := range s.h.waiting {
		visit(wp.pod)
	}
}
func (fakeScheduler) NativeScheduled(string, string) ([]*v1.Pod, bool) { return nil, false }

func member(i int) *v1.Pod {
	name := fmt.Sprintf("m%d", i)
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(v1alpha1.PodGroupLabel, "g").Obj()
}

func status(s *fwk.Status) string {
	if s.IsSuccess() {
		return "Success"
	}
	return s.Code().String() + ": " + s.Message()
}

// TestPreEnqueueQuorum: members stay out of the queue until their PodGroup
// exists and has minMember live members.
func TestPreEnqueueQuorum(t *testing.T) {
	for _, tt := range []struct {
		name    string
		members int
		noGroup bool
		served  bool
		want    string
	}{
		{name: "CRD not served", members: 3, served: false, want: "UnschedulableAndUnresolvable: WaitingForPodGroup: scheduling.x-k8s.io/v1alpha1 PodGroups are not served"},
		{name: "no PodGroup", members: 3, served: true, noGroup: true, want: "UnschedulableAndUnresolvable: WaitingForPodGroup: PodGroup ns/g not found"},
		{name: "2 of 3 members", members: 2, served: true, want: "UnschedulableAndUnresolvable: WaitingForMembers: gang ns/g has 2 of its 3 members"},
		{name: "quorum", members: 3, served: true, want: "Success"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 3, nil, tt.members)
			f.pl.served = func() bool { return tt.served }
			if tt.noGroup {
				f.gangs.pg = nil
			}
			got := status(f.pl.PreEnqueue(context.Background(), member(0)))
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("PreEnqueue = %q, want prefix %q", got, tt.want)
			}
		})
	}
}

// TestPreEnqueueMalformed: a PodGroup that cannot be read keeps its members
// out, with an Event saying why.
func TestPreEnqueueMalformed(t *testing.T) {
	f := newFixture(t, 2, nil, 2)
	f.gangs.err = &gang.InvalidError{Reason: gang.ReasonMalformedPodGroup, Key: gang.Key{API: gang.Label, Namespace: "ns", Name: "g"}, Err: errors.New("spec.minMember: expected int")}
	got := status(f.pl.PreEnqueue(context.Background(), member(0)))
	if !strings.Contains(got, "MalformedPodGroup") || !strings.Contains(got, "spec.minMember") {
		t.Errorf("PreEnqueue = %q", got)
	}
	if e := <-f.events.Events; !strings.Contains(e, "Warning MalformedPodGroup") {
		t.Errorf("event %q", e)
	}
}

// TestPermitWaitsForQuorumThenAllowsAll: members wait at Permit until
// minMember are placed (bound or waiting), for the PodGroup's timeout (or
// the default); the member completing the quorum allows every waiting one.
func TestPermitWaitsForQuorumThenAllowsAll(t *testing.T) {
	for _, tt := range []struct {
		name        string
		timeout     *int32
		wantTimeout time.Duration
	}{
		{"PodGroup's scheduleTimeoutSeconds", ptr.To[int32](30), 30 * time.Second},
		{"default timeout", nil, 60 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 3, tt.timeout, 3)
			ctx := context.Background()
			m := f.gangs.members
			// m0 is already bound; m1 arrives: 2 of 3 placed.
			m[0].Spec.NodeName = "n0"
			st, timeout := f.pl.Permit(ctx, nil, m[1], "n1")
			if st.Code() != fwk.Wait || timeout != tt.wantTimeout || !strings.Contains(st.Message(), "2 of 3 members") {
				t.Fatalf("Permit(m1) = %q, %v; want Wait for %v", status(st), timeout, tt.wantTimeout)
			}
			f.handle.wait(m[1], "n1")
			// m2 completes the quorum: allowed, and m1 too.
			st, _ = f.pl.Permit(ctx, nil, m[2], "n2")
			if !st.IsSuccess() {
				t.Fatalf("Permit(m2) = %q, want Success", status(st))
			}
			if !f.handle.waiting[m[1].UID].allowed {
				t.Error("the waiting member m1 was not allowed")
			}
		})
	}
}

// TestRejectionReleasesTheGangAndBacksOff: a member that fits nowhere
// releases every waiting member; the gang is kept out of the queue for
// rejectedGangBackoffSeconds (rejections meanwhile do not extend it), and
// its pending members are activated when the backoff ends.
func TestRejectionReleasesTheGangAndBacksOff(t *testing.T) {
	f := newFixture(t, 3, nil, 3)
	ctx := context.Background()
	m := f.gangs.members
	f.handle.wait(m[0], "n0")
	f.handle.wait(m[1], "n1")

	_, st := f.pl.PostFilter(ctx, nil, m[2], nil)
	if st.Code() != fwk.Unschedulable {
		t.Errorf("PostFilter = %q, want Unschedulable (so overflow preemption still runs)", status(st))
	}
	for _, p := range m[:2] {
		if r := f.handle.waiting[p.UID].rejected; !strings.Contains(r, "GangRejected: gang ns/g released: member m2 fits nowhere") {
			t.Errorf("waiting %s: rejected with %q", p.Name, r)
		}
	}
	if e := <-f.events.Events; !strings.Contains(e, "Normal GangRejected released 2 waiting members: member m2 fits nowhere; retrying in 10s") {
		t.Errorf("event %q", e)
	}
	// The rejected members are back in the queue: held out by the backoff.
	delete(f.handle.waiting, m[0].UID)
	delete(f.handle.waiting, m[1].UID)
	if got := status(f.pl.PreEnqueue(ctx, m[0])); !strings.Contains(got, "GangRejected: gang ns/g backs off until 2026-12-01T10:00:10Z") {
		t.Errorf("PreEnqueue during backoff = %q", got)
	}
	// Another rejection 5 s later does not extend the backoff.
	f.clock.Step(5 * time.Second)
	f.pl.Unreserve(ctx, nil, m[1], "n1")
	if got := status(f.pl.PreEnqueue(ctx, m[0])); !strings.Contains(got, "until 2026-12-01T10:00:10Z") {
		t.Errorf("PreEnqueue after a second rejection = %q, want the first backoff", got)
	}
	if len(f.handle.activated) != 0 {
		t.Fatalf("activated during the backoff: %v", f.handle.activated)
	}
	// The backoff ends: the pending members are activated and may enter.
	f.clock.Step(6 * time.Second)
	if diff := cmp.Diff([][]string{{"m0", "m1", "m2"}}, sorted(f.handle.activated)); diff != "" {
		t.Errorf("activated after the backoff (-want,+got):\n%s", diff)
	}
	if got := status(f.pl.PreEnqueue(ctx, m[0])); got != "Success" {
		t.Errorf("PreEnqueue after the backoff = %q", got)
	}
}

// TestFreedClaimLiftsBackoff: a gang whose research claim has freed its
// room is tried at once, not held out for the rest of its backoff.
func TestFreedClaimLiftsBackoff(t *testing.T) {
	f := newFixture(t, 2, nil, 2)
	ctx := context.Background()
	m := f.gangs.members
	freed := false
	f.pl.freed = func(gang.Key) bool { return freed }
	f.pl.PostFilter(ctx, nil, m[1], nil)
	if got := status(f.pl.PreEnqueue(ctx, m[0])); !strings.Contains(got, "backs off") {
		t.Fatalf("PreEnqueue during backoff, claim not freed yet = %q", got)
	}
	freed = true
	if got := status(f.pl.PreEnqueue(ctx, m[0])); got != "Success" {
		t.Errorf("PreEnqueue once the claim freed the room = %q, want Success", got)
	}
}

// TestPermitIgnoresOtherGangs: waiting pods of another gang do not count
// toward the quorum and are not allowed.
func TestPermitIgnoresOtherGangs(t *testing.T) {
	f := newFixture(t, 2, nil, 2)
	other := st.MakePod().Namespace("ns").Name("x").UID("x").Label(v1alpha1.PodGroupLabel, "other").Obj()
	f.handle.wait(other, "n9")
	st, _ := f.pl.Permit(context.Background(), nil, f.gangs.members[0], "n0")
	if st.Code() != fwk.Wait {
		t.Fatalf("Permit = %q, want Wait (the other gang's pod is not a member)", status(st))
	}
	if f.handle.waiting[other.UID].allowed {
		t.Error("a pod of another gang was allowed")
	}
}

func sorted(calls [][]string) [][]string {
	out := make([][]string, len(calls))
	for i, c := range calls {
		out[i] = slices.Sorted(slices.Values(c))
	}
	return out
}
