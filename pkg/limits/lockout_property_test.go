package limits_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// lockModel is a lockout as docs/semantics.md states it, built on the
// plain algorithm: a lock's end beside a one-key model of the limit
// without its block_for, which sees a hit only while the key is not locked
// (every hit, if the limit counts refused ones), and a refusal of a hit
// (or peek) that could fit starts a lock of block_for, which only a refund
// lifts.
type lockModel struct {
	plain model
	end   int64
}

func (m *lockModel) decide(l limits.Limit, cost, now int64) limits.Result {
	inner := l
	inner.BlockFor = 0
	locked := now < m.end
	switch {
	case cost < 0:
		m.end = 0
		return m.plain.decide(inner, cost, now, 0).Result
	case locked:
		if l.CountRefused {
			m.plain.decide(inner, cost, now, 0)
		}
	default:
		r := m.plain.decide(inner, cost, now, 0).Result
		if r.Allowed || cost > l.MaxCost() {
			return r
		}
		m.end = now + l.BlockFor.Microseconds()
	}
	left := time.Duration(m.end-now) * time.Microsecond
	want := limits.Result{ResetAfter: left, Locked: true}
	if cost <= l.MaxCost() {
		want.RetryAfter = left
	}
	return want
}

// TestPropertyLockout drives random sequences of hits, peeks, refunds and
// hits that can never fit through Decide on lockouts of every algorithm
// that takes block_for, one key with its state expiring as a store's
// would, and checks each answer against lockModel: refused with the lock's
// time left while locked, the lock lasting block_for from the first
// refusal whatever the window says, no refused hit counted during it
// unless count_refused, and a refund lifting it.
func TestPropertyLockout(t *testing.T) {
	n, extra := propertyIterations(t), propertySeed(t)
	for _, a := range []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog} {
		locks := 0
		for _, countRefused := range []bool{false, true} {
			for i := range n {
				seed := uint64(i)*2 + uint64(a)*1_000_003 + extra + 77
				if countRefused {
					seed++
				}
				locks += lockoutSequence(t, seed, a, countRefused)
			}
		}
		if locks < n {
			t.Errorf("%s: %d locks in %d sequences: the sequences hardly test the lock", a, locks, 2*n)
		}
	}
}

func lockoutSequence(t *testing.T, seed uint64, a limits.Algorithm, countRefused bool) (locks int) {
	r := rand.New(rand.NewPCG(seed, 0x10c4))
	l := randomLimit(r, a, variant{refunds: true, countRefused: countRefused})
	// A lock shorter than, about as long as, or much longer than a period.
	l.BlockFor = max(time.Millisecond, []time.Duration{l.Period / 3, l.Period, 5 * l.Period, time.Duration(1+r.IntN(3000)) * time.Millisecond}[r.IntN(4)])
	l.BlockFor = min(l.BlockFor.Truncate(time.Microsecond), limits.MaxPeriod)
	if err := l.Validate(); err != nil {
		t.Fatalf("seed %d: %s: %v", seed, l, err)
	}
	now := int64(base + r.Int64N(l.PeriodMicros()*3))
	var store model // the key as a store keeps it, lock and all
	var want lockModel
	var last time.Duration
	for i := range sequenceHits {
		gap := nextGap(r, l, last)
		if r.IntN(10) == 0 {
			gap = r.Int64N(l.BlockFor.Microseconds() + 2)
		}
		now += gap
		cost := randomCost(r, l, true)
		wasLocked := now < want.end
		w := want.decide(l, cost, now)
		got := store.decide(l, cost, now, 0).Result
		if got != w {
			t.Fatalf("seed %d, %s, hit %d at +%dµs, cost %d (locked until +%dµs): got %+v, want %+v",
				seed, l, i, now-base, cost, want.end-base, got, w)
		}
		if !wasLocked && now < want.end {
			locks++
		}
		last = got.RetryAfter
	}
	return locks
}
