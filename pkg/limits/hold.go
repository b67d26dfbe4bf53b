package limits

import (
	"context"
	"fmt"
	"time"
)

// A hold is a request's cost reserved when the request starts and settled
// when it ends, both named by the request's id (docs/holds.md). A budget
// charged only after the response lets N concurrent requests all pass a
// nearly spent budget; a reservation takes the cost up front, so the
// requests in flight can never together exceed it, and the settle then
// puts the actual cost in its place.
//
// What each store does with a Hit's Hold (docs/semantics.md, "Holds"):
//
//   - A reserve (ID set, not Settle, Cost > 0) is decided as any hit,
//     all-or-nothing. Admitted, it holds its cost under the id until the
//     lease ends; refused, it holds and charges nothing, count_refused or
//     not (ReserveLimit). A reserve of an id the key
//     already holds charges nothing and is answered allowed, as the first
//     one was (Envoy retries a call).
//   - A settle (ID and Settle set) ends the id's hold and replaces the
//     held cost with the hit's Cost: the held cost is given back (to the
//     window of the reservation's instant for a window limit, out of the
//     reservation's own entry for a sliding log, at the settle's instant
//     for a bucket: GiveBack) and Cost is charged at the settle's
//     instant whether it fits or not, since the request has been served
//     (down to one period's worth of debt, as a count_refused charge).
//     With no hold (never reserved, refused, or lapsed) it is a plain hit
//     of Cost, exactly as a hit without a Hold.
//   - On a concurrency limit a reserve takes its slots under the id, held
//     until the earlier of the limit's lease and the hold's; a settle frees
//     exactly that id's slots (nothing when the id holds none) and charges
//     nothing.
//   - A hold not settled within its Lease lapses: its cost is given back
//     as a settle of cost 0 would, its slots are freed.
//   - A hit with no ID (a peek, a plain hit) is decided as today: held
//     costs are part of the count it reads.
//
// The zero Hold is none, and a hit without one is decided exactly as
// before holds existed.
type Hold struct {
	// ID names the request (Envoy's x-request-id). Empty: the hit
	// reserves and settles nothing.
	ID string
	// Settle makes the hit end the id's hold; without it, a hit with an
	// ID and a positive Cost reserves.
	Settle bool
	// Lease is how long an unsettled hold lasts; it is set on every hit
	// of a domain that declares holds, with or without an ID.
	Lease time.Duration
}

// The bounds of a hold, checked where the hit is built (the limits file,
// the service) and again by every store (CheckHold).
const (
	// MaxHoldID is the longest id a hold may carry, in bytes: a request
	// id is a UUID (36 bytes) or a trace id; a longer one is a bad
	// request, refused before any store keeps it.
	MaxHoldID = 256
	// MaxLease is the longest lease a domain may declare: holds are
	// bounded in memory by their leases, and a request that runs longer
	// than a day is not one a hold describes.
	MaxLease = 24 * time.Hour
)

// HoldOutcome says what a hit did with its Hold, for the metrics: the
// service counts each outcome (rls_holds_total).
type HoldOutcome uint8

const (
	// HoldNone: the hit has no ID, or is a peek or a refund with one.
	HoldNone HoldOutcome = iota
	// HoldReserved: a reserve admitted, its cost now held.
	HoldReserved
	// HoldRefused: a reserve refused, nothing held.
	HoldRefused
	// HoldRepeated: a reserve of an id already held, charged nothing.
	HoldRepeated
	// HoldSettled: a settle that ended a live hold.
	HoldSettled
	// HoldUnheld: a settle that found no live hold, decided as a plain hit.
	HoldUnheld
)

// String names the outcome as the metrics label it.
func (o HoldOutcome) String() string {
	switch o {
	case HoldReserved:
		return "reserved"
	case HoldRefused:
		return "refused"
	case HoldRepeated:
		return "repeated"
	case HoldSettled:
		return "settled"
	case HoldUnheld:
		return "unheld"
	}
	return "none"
}

// Reserves reports whether h reserves: an ID, no Settle, a positive Cost.
func (h Hit) Reserves() bool { return h.Hold.ID != "" && !h.Hold.Settle && h.Cost > 0 }

// Settles reports whether h settles: an ID and Settle.
func (h Hit) Settles() bool { return h.Hold.ID != "" && h.Hold.Settle }

// CheckHold returns why h's Hold cannot be decided, or nil: an id too long,
// a lease out of bounds, an ID or Settle without a lease.
func CheckHold(h Hold) error {
	switch {
	case h == Hold{}:
		return nil
	case len(h.ID) > MaxHoldID:
		return fmt.Errorf("hold id of %d bytes, longer than %d", len(h.ID), MaxHoldID)
	case h.Lease <= 0 || h.Lease > MaxLease:
		return fmt.Errorf("hold lease %s out of (0, %s]", h.Lease, MaxLease)
	}
	return nil
}

// HoldReader is a Store that can tell how much of a key's limit its
// unsettled holds take: what the tenant's read of its usage shows beside
// the remaining (which already counts them). Every store implements it,
// and every layer of a store stack passes it on to the store it wraps.
type HoldReader interface {
	// Held returns the cost (slots, for a concurrency limit) held under
	// h's key by holds whose lease has not ended, and how many holds
	// those are.
	Held(ctx context.Context, h Hit) (cost, holds int64, err error)
}

// Held reads h's holds from s, which must be a HoldReader.
func Held(ctx context.Context, s Store, h Hit) (cost, holds int64, err error) {
	r, ok := s.(HoldReader)
	if !ok {
		return 0, 0, fmt.Errorf("store %T cannot read holds", s)
	}
	return r.Held(ctx, h)
}
