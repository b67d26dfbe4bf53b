package rls

import (
	"context"
	"errors"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestUsage: every limit that would decide the descriptor, with what a
// peek reads (Explain's state), consuming nothing.
func TestUsage(t *testing.T) {
	f := newFixture(t, nil, Options{})
	ctx := context.Background()
	f.call(t, desc("pair", "p"))
	f.call(t, desc("pair", "p"))
	u, err := f.svc.Usage(ctx, "edge", entries("pair", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Limits) != 2 || u.Domain != "edge" || len(u.Entries) != 1 || u.Unlimited {
		t.Fatalf("usage %+v: want the pair's two limits", u)
	}
	_, readsHolds := limits.Store(f.store).(limits.HoldReader)
	ex := explain(t, f.svc, "edge", "pair", "p")
	for i, want := range []struct {
		name               string
		algorithm          string
		requests, capacity int64
		period             float64
		used, remaining    int64
	}{
		{"per-second", "token_bucket", 2, 2, 1, 2, 0},
		{"per-hour", "fixed_window", 3, 3, 3600, 2, 1},
	} {
		l := u.Limits[i]
		if l.Name != want.name || l.Limit.Algorithm != want.algorithm || l.Limit.Requests != want.requests ||
			l.Limit.Capacity != want.capacity || l.Limit.PeriodSeconds != want.period || l.Used != want.used || l.Remaining != want.remaining {
			t.Errorf("limit %d: %+v, want %+v", i, l, want)
		}
		st := ex.Limits[i].State
		if l.Remaining != st.Remaining || l.Allowed != st.Allowed || l.ResetSeconds != st.ResetSeconds {
			t.Errorf("limit %d: remaining %d allowed %v reset %v; the peek reads %d %v %v", i, l.Remaining, l.Allowed, l.ResetSeconds, st.Remaining, st.Allowed, st.ResetSeconds)
		}
		if l.HeldKnown != readsHolds || l.Held != 0 || l.Holds != 0 {
			t.Errorf("limit %d: held %d holds %d known %v; want 0, 0, %v (the store reads holds: %v)", i, l.Held, l.Holds, l.HeldKnown, readsHolds, readsHolds)
		}
	}
	again, err := f.svc.Usage(ctx, "edge", entries("pair", "p"))
	if err != nil || jsonOf(again) != jsonOf(u) {
		t.Errorf("a second read: %+v, %v; want what the first read (nothing consumed)", again, err)
	}
}

// TestUsageNoLimit: an unknown domain is an error of its own; a
// descriptor no limit decides, or an unlimited one, has no limits.
func TestUsageNoLimit(t *testing.T) {
	f := newFixture(t, nil, Options{})
	ctx := context.Background()
	if _, err := f.svc.Usage(ctx, "nowhere", entries("a", "b")); !errors.Is(err, ErrUnknownDomain) {
		t.Errorf("unknown domain: %v, want ErrUnknownDomain", err)
	}
	for _, tc := range []struct {
		kv        []string
		unlimited bool
	}{
		{[]string{"nothing", "here"}, false},
		{[]string{"path", "/login"}, false},
		{[]string{"path", "/healthz"}, true},
	} {
		u, err := f.svc.Usage(ctx, "edge", entries(tc.kv...))
		if err != nil || len(u.Limits) != 0 || u.Unlimited != tc.unlimited {
			t.Errorf("%v: %+v, %v; want no limits, unlimited %v", tc.kv, u, err, tc.unlimited)
		}
	}
	if _, err := f.svc.Usage(ctx, "", entries("a", "b")); err == nil || errors.Is(err, ErrUnknownDomain) {
		t.Errorf("empty domain: %v, want the decision's refusal", err)
	}
}

// heldStore is a store that reports fixed holds on every key: how the
// service's read of Held reaches the answer, before the stores keep
// holds of their own.
type heldStore struct {
	limits.Store
	cost, holds int64
	err         error
}

func (s heldStore) Held(context.Context, limits.Hit) (int64, int64, error) {
	return s.cost, s.holds, s.err
}

// TestUsageHeld: held and holds are what the store's HoldReader says; a
// failed read is ErrStoreRead.
func TestUsageHeld(t *testing.T) {
	f := newFixture(t, func(s limits.Store) limits.Store { return heldStore{Store: s, cost: 3, holds: 2} }, Options{})
	u, err := f.svc.Usage(context.Background(), "edge", entries("remote_address", "1.2.3.4"))
	if err != nil || len(u.Limits) != 1 {
		t.Fatalf("%+v, %v", u, err)
	}
	if l := u.Limits[0]; l.Held != 3 || l.Holds != 2 || !l.HeldKnown {
		t.Errorf("held %d holds %d known %v, want 3, 2, true", l.Held, l.Holds, l.HeldKnown)
	}
	boom := errors.New("boom")
	f = newFixture(t, func(s limits.Store) limits.Store { return heldStore{Store: s, err: boom} }, Options{})
	if _, err := f.svc.Usage(context.Background(), "edge", entries("remote_address", "1.2.3.4")); !errors.Is(err, ErrStoreRead) {
		t.Errorf("a failed read: %v, want ErrStoreRead", err)
	}
}
