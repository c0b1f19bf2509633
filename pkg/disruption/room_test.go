// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package disruption

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/sluice-sched/sluice/pkg/capacity"
	"github.com/sluice-sched/sluice/pkg/overflow"
	"github.com/sluice-sched/sluice/pkg/overflow/offer"
)

// holdings is one claim holding 6 GPUs at provider a for victims of
// ReplicaSet rs-serve, one of which (2 GPUs) is evicted.
type holdings struct{}

func (holdings) Reservations() []overflow.Reservation {
	return []overflow.Reservation{{Target: overflow.Target{Node: "vk", Provider: "a"}, Requests: capacity.Resources{Scalar: map[v1.ResourceName]int64{"nvidia.com/gpu": 6}}}}
}

func (holdings) ReservationsFor(owner types.UID) []overflow.Reservation {
	gpus := int64(6)
	if owner == "rs-serve" {
		gpus = 4 // its evicted victim's 2 are its replacement's to take
	}
	return []overflow.Reservation{{Target: overflow.Target{Node: "vk", Provider: "a"}, Requests: capacity.Resources{Scalar: map[v1.ResourceName]int64{"nvidia.com/gpu": gpus}}}}
}

// TestRoomHoldsWhatClaimsHold: the ledger takes every live claim's
// reservation out of the room any actor counts, and lets a replacement
// take its own victim's; without holdings nothing is held.
func TestRoomHoldsWhatClaimsHold(t *testing.T) {
	l, err := NewLedger(informers.NewSharedInformerFactory(fake.NewClientset(), 0), intstr.FromString("25%"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := offer.Offer{Providers: []offer.Provider{{Name: "a", Healthy: true, Capacity: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}
	counted := overflow.RoomOn("vk", o, nil, nil)
	pod := func(gpus string) *v1.Pod {
		return st.MakePod().Name("p").UID("p").Req(map[v1.ResourceName]string{"nvidia.com/gpu": gpus}).Obj()
	}
	if _, ok := l.Room(counted).Take(pod("8")); !ok {
		t.Fatal("no holdings: 8 GPUs of 8 free, want them taken")
	}
	l.HoldRoomOf(holdings{})
	if _, ok := l.Room(counted).Take(pod("4")); ok {
		t.Error("6 of 8 GPUs held by a claim: 4 taken, want refused")
	}
	if _, ok := l.Room(counted).Take(pod("2")); !ok {
		t.Error("6 of 8 GPUs held by a claim: 2 refused, want taken")
	}
	if _, ok := counted.Holding(l.Held("rs-serve")).Take(pod("4")); !ok {
		t.Error("a replacement of rs-serve (its victim's 2 GPUs held for it): 4 refused, want taken")
	}
	if _, ok := counted.Holding(l.Held("rs-other")).Take(pod("4")); ok {
		t.Error("a pod of another controller: 4 taken, want refused")
	}
}
