// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package claims

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sluice-sched/sluice/pkg/apis/claims/v1alpha1"
)

// TestSplit: a claim is split into records of at most
// MaxVictimsPerRecord victims, in order, each with the whole spec but the
// victims; at the longest names Kubernetes allows, a full record, every
// victim evicted and replaced, with a gang of 512 claimants, stays under
// etcd's 1.5 MiB.
func TestSplit(t *testing.T) {
	long := func(prefix string, i int) string {
		s := fmt.Sprintf("%s-%d-", prefix, i)
		return s + strings.Repeat("x", 253-len(s))
	}
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: NameOf("research/train"),
		Annotations: map[string]string{AttemptsAnnotation: "1"}}}
	c.Spec = v1alpha1.ResearchClaimSpec{Key: "research/train", Domain: "spine/s0", TimeoutSeconds: 600}
	for i := range 512 {
		c.Spec.Claimants = append(c.Spec.Claimants, v1alpha1.Claimant{Name: long("train", i), UID: types.UID(fmt.Sprintf("%036d", i)), Node: long("node", i)})
	}
	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("4Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	for i := range 2*v1alpha1.MaxVictimsPerRecord + 1 {
		// Each victim of another controller: nothing is said once.
		owner := v1alpha1.Owner{Kind: "ReplicaSet", Name: long("rs", i), UID: types.UID(fmt.Sprintf("o%035d", i))}
		c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{Namespace: "production", Name: long("serve", i), UID: types.UID(fmt.Sprintf("v%035d", i)),
			Node: long("node", i), Owner: owner, Budget: "default/production/ReplicaSet/" + owner.Name, Requests: requests,
			Target: v1alpha1.Target{Node: "overflow", Provider: "provider-a"}, TemplateHash: "0123456789"})
	}
	records := Split(c)
	if len(records) != 3 {
		t.Fatalf("%d records of %d victims, want 3", len(records), len(c.Spec.Victims))
	}
	next := 0
	for i, r := range records {
		wantName := c.Name
		if i > 0 {
			wantName = fmt.Sprintf("%s-%d", c.Name, i+1)
		}
		if r.Name != wantName || r.Spec.Records != 3 || r.Spec.Key != c.Spec.Key || len(r.Spec.Claimants) != 512 {
			t.Fatalf("record %d: name %s, records %d, key %s, %d claimants", i, r.Name, r.Spec.Records, r.Spec.Key, len(r.Spec.Claimants))
		}
		if (r.Annotations[AttemptsAnnotation] != "") != (i == 0) {
			t.Errorf("record %d: annotations %v; only the first carries the attempts", i, r.Annotations)
		}
		for _, v := range r.Spec.Victims {
			if v.UID != c.Spec.Victims[next].UID {
				t.Fatalf("record %d: victim %s out of order", i, v.Name)
			}
			next++
		}
		for _, v := range r.Spec.Victims {
			r.Status.Evicted = append(r.Status.Evicted, v1alpha1.Eviction{UID: v.UID, Time: metav1.Now()})
			r.Status.Replaced = append(r.Status.Replaced, v.UID)
			r.Status.Replacements = append(r.Status.Replacements, types.UID(strings.Repeat("r", 36)))
		}
		r.Status.Message = strings.Repeat("m", 1000)
		obj, err := r.ToUnstructured()
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 3<<19 {
			t.Errorf("record %d takes %d bytes, over etcd's 1.5 MiB", i, len(data))
		}
		if i == 0 {
			t.Logf("a full record of %d victims and 512 claimants, names of 253 bytes: %.2f MiB", len(r.Spec.Victims), float64(len(data))/(1<<20))
		}
	}
	if next != len(c.Spec.Victims) {
		t.Fatalf("%d victims in the records, want %d", next, len(c.Spec.Victims))
	}
	if one := Split(&v1alpha1.ResearchClaim{Spec: v1alpha1.ResearchClaimSpec{Victims: c.Spec.Victims[:v1alpha1.MaxVictimsPerRecord]}}); len(one) != 1 || one[0].Spec.Records != 0 {
		t.Errorf("a claim of %d victims: %d records (spec.records %d), want itself alone", v1alpha1.MaxVictimsPerRecord, len(one), one[0].Spec.Records)
	}
}

// TestClaimOf50000Victims: a claim of 50,000 production pods (2,500
// ReplicaSets of 20, no PodDisruptionBudgets: each paced by its default
// budget, 5 at a time) is recorded in 100 records, carried out with no
// budget overdrawn, Freed only once every record is (its claimants then
// activated once), and ended once its claimant is bound, every record
// deleted and the first last.
func TestClaimOf50000Victims(t *testing.T) {
	const sets, perSet, budget = 2500, 20, 5
	r := newRig(t)
	big := node("vk", true)
	big.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("100000"), v1.ResourcePods: resource.MustParse("100000")}
	r.put(big)
	var victims []*v1.Pod
	for i := range sets {
		victims = append(victims, r.rs(fmt.Sprintf("serve-%04d", i), perSet, "n0", 1)...)
	}
	claimant := r.claimant("train")
	key := r.claim(claimant, victims)
	first, _ := r.get(key)
	records := r.store.RecordsOf(first)
	if len(records) != 100 || !Whole(records) {
		t.Fatalf("%d records in the store (whole: %v), want 100", len(records), Whole(records))
	}
	keys := make([]string, len(records))
	for i, rec := range records {
		keys[i] = rec.Namespace + "/" + rec.Name
	}
	// A round: every record synced once, then the ReplicaSet controller
	// replaces every pod evicted, on the overflow node.
	replaced, at := 0, time.Duration(0)
	for round := 0; !r.store.Freed("prod", first.Name); round++ {
		if round == 20 {
			t.Fatalf("not Freed after %d rounds: %d of %d evicted", round, len(r.evicted()), len(victims))
		}
		at += time.Second
		for _, k := range keys {
			r.clock.SetTime(t0.Add(at))
			if err := r.engine.Sync(r.ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		evicted := r.evicted()
		perOwner := map[string]int{}
		for _, name := range evicted[replaced:] {
			perOwner[name[:len("serve-0000")]]++
		}
		for owner, n := range perOwner {
			if n > budget {
				t.Fatalf("round %d: %d pods of %s evicted at once, its default budget allows %d", round, n, owner, budget)
			}
		}
		for i, name := range evicted[replaced:] {
			r.replace(name[:len("serve-0000")], fmt.Sprintf("new-%d-%d", round, i), "vk")
		}
		replaced = len(evicted)
	}
	if len(r.evicted()) != len(victims) {
		t.Fatalf("%d evicted when Freed, want %d", len(r.evicted()), len(victims))
	}
	if len(r.activated) != 1 {
		t.Errorf("claimants activated %d times, want once (when the last record was Freed)", len(r.activated))
	}
	bound := claimant.DeepCopy()
	bound.Spec.NodeName = "n0"
	r.put(bound)
	at += time.Second
	r.clock.SetTime(t0.Add(at))
	if err := r.engine.Sync(r.ctx, key); err != nil {
		t.Fatal(err)
	}
	r.refresh()
	if _, ok := r.get(key); !ok {
		t.Fatal("the first record was deleted while the others live: they would go with it, holding room")
	}
	for _, k := range keys {
		if err := r.engine.Sync(r.ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	r.refresh()
	for _, k := range keys[1:] {
		if _, ok := r.get(k); ok {
			t.Fatalf("record %s outlived its bound claimant and its replacements", k)
		}
	}
	r.sync(key, at+time.Second)
	if _, ok := r.get(key); ok {
		t.Fatal("the first record outlived the others")
	}
}

// TestRecordsGiveUpTogether: a claim in three records. A record waiting
// on its budget is not given up while another record moves forward; once
// none has for the timeout, one record gives up, tells the claimants
// once, and the others follow it without telling them again.
func TestRecordsGiveUpTogether(t *testing.T) {
	r := newRig(t)
	big := node("vk", true)
	big.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("10000"), v1.ResourcePods: resource.MustParse("10000")}
	r.put(big)
	// 1,001 victims: 1,000 in the first two records, paced by default
	// budgets; the last alone, under a PDB that allows nothing.
	var victims []*v1.Pod
	for i := range 50 {
		victims = append(victims, r.rs(fmt.Sprintf("serve-%03d", i), 20, "n0", 1)...)
	}
	victims = append(victims, r.rs("stuck", 1, "n0", 1)...)
	r.pdb("stuck", "stuck", 1, 1, 0) // allows none now
	key := r.claim(r.claimant("train"), victims)
	first, _ := r.get(key)
	records := r.store.RecordsOf(first)
	if len(records) != 3 {
		t.Fatalf("%d records, want 3", len(records))
	}
	last := records[2].Namespace + "/" + records[2].Name
	syncAll := func(at time.Duration) {
		for _, rec := range records {
			r.clock.SetTime(t0.Add(at))
			if err := r.engine.Sync(r.ctx, rec.Namespace+"/"+rec.Name); err != nil {
				t.Fatal(err)
			}
		}
		r.refresh()
	}
	syncAll(0)
	// The last record waits on its PDB past the timeout (600 s), while
	// the others move forward at 500 s.
	for i, name := range r.evicted() {
		r.replace(name[:len("serve-000")], fmt.Sprintf("new-%d", i), "vk")
	}
	syncAll(500 * time.Second)
	syncAll(700 * time.Second)
	if c, _ := r.get(last); !Live(c) {
		t.Fatalf("the record waiting on its budget was given up while the claim moved forward 200 s ago: %s", c.Status.Message)
	}
	// The victims evicted at 500 s stop holding room at 800 s (their
	// replacement timeout): progress, the last.
	syncAll(900 * time.Second)
	syncAll(1600 * time.Second)
	for _, rec := range records {
		c, _ := r.get(rec.Namespace + "/" + rec.Name)
		if Live(c) {
			t.Errorf("record %s is %s after the claim made no progress for its timeout (%s, %s)", c.Name, c.Status.Phase, c.Status.ProgressTime, c.Status.Message)
		}
	}
	if got := r.events(ReasonGivenUp); len(got) != 1 {
		t.Errorf("%d %s Events on the claimant, want 1: %v", len(got), ReasonGivenUp, got)
	}
}

// TestBackoffCountsEarlierClaims: a claim planned after two were given up
// for the same claimants (its attempts annotation) waits four times the
// backoff when it is given up too, not once.
func TestBackoffCountsEarlierClaims(t *testing.T) {
	r := newRig(t)
	r.rs("stuck", 1, "n0", 1)
	r.pdb("stuck", "stuck", 1, 1, 0) // allows none now
	pods, _ := r.inf.Core().V1().Pods().Lister().List(labels.Everything())
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: NameOf("prod/train"), CreationTimestamp: metav1.NewTime(t0),
		Annotations: map[string]string{AttemptsAnnotation: "2"}}}
	claimant := r.claimant("train")
	c.Spec = v1alpha1.ResearchClaimSpec{Key: "prod/train", Domain: "n0", TimeoutSeconds: 600,
		Claimants: []v1alpha1.Claimant{{Name: claimant.Name, UID: claimant.UID, Node: "n0"}}}
	for _, p := range pods {
		if p.Labels["app"] == "stuck" {
			b, _ := r.ledger.Of(p)
			c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: "n0",
				Owner: v1alpha1.Owner{Kind: "ReplicaSet", Name: "stuck", UID: "rs-stuck"}, Budget: b.Name, Target: v1alpha1.Target{Node: "vk"}})
		}
	}
	if _, err := r.store.CreateClaim(r.ctx, c); err != nil {
		t.Fatal(err)
	}
	r.refresh()
	key := c.Namespace + "/" + c.Name
	r.sync(key, 601*time.Second)
	got, _ := r.get(key)
	if got.Status.Phase != v1alpha1.PhaseGivenUp || got.Status.RetryAfter == nil {
		t.Fatalf("phase %s, want GivenUp with a retry time", got.Status.Phase)
	}
	if wait := got.Status.RetryAfter.Sub(t0.Add(601 * time.Second)); wait != 4*30*time.Second {
		t.Errorf("the third claim given up waits %s before the next, want %s (the backoff doubled twice)", wait, 4*30*time.Second)
	}
}

// TestClaimRecordedWholeOrNotAtAll: when one record of a claim cannot be
// written, the records written are deleted and the error says which.
func TestClaimRecordedWholeOrNotAtAll(t *testing.T) {
	r := newRig(t)
	var victims []*v1.Pod
	for i := range 60 {
		victims = append(victims, r.rs(fmt.Sprintf("serve-%02d", i), 20, "n0", 1)...)
	}
	r.dyn.PrependReactor("create", "researchclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured); ok && strings.HasSuffix(u.GetName(), "-3") {
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is away"))
		}
		return false, nil, nil
	})
	c := &v1alpha1.ResearchClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: NameOf("prod/train")}}
	c.Spec = v1alpha1.ResearchClaimSpec{Key: "prod/train", Domain: "n0", TimeoutSeconds: 600}
	for _, v := range victims {
		c.Spec.Victims = append(c.Spec.Victims, v1alpha1.Victim{Namespace: v.Namespace, Name: v.Name, UID: v.UID, Node: "n0", Target: v1alpha1.Target{Node: "vk"}})
	}
	_, err := r.store.CreateClaim(r.ctx, c)
	if err == nil || !strings.Contains(err.Error(), "record 3 of 3") {
		t.Fatalf("error %v, want one naming record 3 of 3", err)
	}
	list, lerr := r.dyn.Resource(v1alpha1.Resource).Namespace("prod").List(r.ctx, metav1.ListOptions{})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d records left of a claim that could not be recorded whole", len(list.Items))
	}
}

// TestSlowReplacementPausesOnlyItsBudget: a claim's victims under two
// default budgets; one ReplicaSet's replacement never comes. Its budget
// stays spent, while the other ReplicaSet's victims go on moving as their
// replacements turn Ready: one slow replacement pauses its own budget,
// not the claim.
func TestSlowReplacementPausesOnlyItsBudget(t *testing.T) {
	r := newRig(t)
	slow := r.rs("slow", 4, "n0", 1) // 25%: one at a time
	fast := r.rs("fast", 4, "n0", 1)
	key := r.claim(r.claimant("train"), append(slow, fast...))
	r.sync(key, 0)
	replaced := map[string]bool{}
	for round := 1; round < 6; round++ {
		for _, name := range r.evicted() {
			if strings.HasPrefix(name, "fast-") && !replaced[name] {
				replaced[name] = true
				r.replace("fast", "new-"+name, "vk")
			}
		}
		r.sync(key, time.Duration(round)*time.Second)
	}
	count := func(prefix string) int {
		n := 0
		for _, name := range r.evicted() {
			if strings.HasPrefix(name, prefix) {
				n++
			}
		}
		return n
	}
	if got := count("slow-"); got != 1 {
		t.Errorf("%d of slow evicted with its one replacement never placed, want 1 (its budget)", got)
	}
	if got := count("fast-"); got != 4 {
		t.Errorf("%d of fast evicted while slow's replacement lagged, want all 4", got)
	}
}
