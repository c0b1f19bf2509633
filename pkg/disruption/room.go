// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package disruption

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-sched/sluice/pkg/overflow"
)

// Holdings is the overflow room live research claims hold for the victims
// they move, read from the ResearchClaims (claims.Store): a victim not yet
// evicted, or evicted with its replacement not yet Ready where it was
// sent, holds its requests at its provider.
type Holdings interface {
	Reservations() []overflow.Reservation
	ReservationsFor(owner types.UID) []overflow.Reservation
}

// HoldRoomOf makes the room live claims hold part of the ledger; call it
// before the scheduler runs. Without it no room is held.
func (l *Ledger) HoldRoomOf(h Holdings) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdings = h
}

// Held is the room live claims hold on the overflow providers. A pod of
// the controller with UID replacing ("" for none) may take, at each
// provider, the room held for one of that controller's evicted victims:
// it is that victim's replacement.
func (l *Ledger) Held(replacing types.UID) []overflow.Reservation {
	l.mu.Lock()
	h := l.holdings
	l.mu.Unlock()
	switch {
	case h == nil:
		return nil
	case replacing == "":
		return h.Reservations()
	}
	return h.ReservationsFor(replacing)
}

// Room is counted, the overflow nodes' room less the pods bound there as
// the caller sees them (the scheduler's snapshot within a cycle, the
// informers in the claim engine), less the room every live claim holds:
// what a new claim's victims, or production the scheduler binds there,
// may still take. Every actor that places pods on an overflow node asks
// here, so a claim's reservation counts against all of them alike.
func (l *Ledger) Room(counted *overflow.Ledger) *overflow.Ledger {
	return counted.Holding(l.Held(""))
}
