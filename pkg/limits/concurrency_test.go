package limits_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// slotModel is a concurrency limit as the requests see it: the expiry of
// every slot an allowed hit took, less those given back (the oldest live
// first) and those whose lease ended. It knows nothing of Decide.
type slotModel struct{ expiries []int64 }

func (m *slotModel) live(now int64) int64 {
	m.expiries = slices.DeleteFunc(m.expiries, func(e int64) bool { return e <= now })
	return int64(len(m.expiries))
}

func (m *slotModel) take(c, at int64) {
	for range c {
		m.expiries = append(m.expiries, at)
	}
	slices.Sort(m.expiries)
}

func (m *slotModel) give(c, now int64) {
	m.live(now)
	m.expiries = m.expiries[min(int64(len(m.expiries)), c):]
}

// TestPropertyConcurrency drives Decide through the one-key store model
// with random acquires (of one or more slots), releases (some of more than
// is held), peeks and gaps (many shorter than the lease, some longer), and
// checks every decision against slotModel: allowed exactly when the slots
// fit, never more than N held (2N with count_refused, whose refused hits
// hold their slots too, but never allowed beyond N), Remaining the free
// slots; a refusal's
// RetryAfter is when enough slots expire (1 µs less is still refused),
// ResetAfter when every slot is free.
func TestPropertyConcurrency(t *testing.T) {
	n := propertyIterations(t)
	for i := range n {
		seed := uint64(i) + propertySeed(t)
		r := rand.New(rand.NewPCG(seed, 0xc0c0))
		l := limits.Limit{Algorithm: limits.Concurrency, Requests: 1 + r.Int64N(12),
			Period: time.Duration(1+r.Int64N(5_000_000)) * time.Microsecond, CountRefused: i%2 == 1}
		t.Run(fmt.Sprintf("seed=%d/%s", seed, l), func(t *testing.T) {
			runConcurrencySequence(t, r, l)
		})
	}
}

func runConcurrencySequence(t *testing.T, r *rand.Rand, l limits.Limit) {
	var m model
	var ref slotModel
	lease, slots := l.PeriodMicros(), l.Requests
	now := int64(1_700_000_000_000_000)
	for step := range 400 {
		switch p := r.IntN(10); {
		case p < 6:
			now += r.Int64N(lease/slots + 1)
		case p < 9:
			now += r.Int64N(lease + 1)
		default:
			now += lease + r.Int64N(lease)
		}
		cost := []int64{1, 1, 1, 2, 3, 0, -1, -1, -2, slots, slots + 1, -slots - 3}[r.IntN(12)]
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d, now %d, cost %d: %s", step, now, cost, fmt.Sprintf(format, args...))
		}
		held := ref.live(now)
		probe := m.clone()
		d := m.decide(l, cost, now, 0)
		res := d.Result
		if l.CountRefused {
			// Waits count from the state that stays, the refused hit's
			// slots included.
			probe = m.clone()
		}
		fits := cost < 0 || cost <= slots && held+max(cost, 1) <= slots
		if res.Allowed != fits {
			fail("allowed %v with %d of %d slots held", res.Allowed, held, slots)
		}
		switch {
		case cost > 0 && res.Allowed:
			ref.take(cost, now+lease)
		case cost > 0 && l.CountRefused:
			// A refused request holds its slots too, up to 2N.
			ref.take(max(0, min(cost, 2*slots-held)), now+lease)
		case cost < 0:
			ref.give(-cost, now)
		}
		allowedHeld := held
		if res.Allowed && cost > 0 {
			allowedHeld += cost
		}
		held = ref.live(now)
		if cost > 0 && res.Allowed && allowedHeld > slots {
			fail("allowed with %d slots held, above %d", allowedHeld, slots)
		}
		if held > 2*slots || held > slots && !l.CountRefused {
			fail("%d slots held, above %d", held, slots)
		}
		if res.Remaining != max(0, slots-held) {
			fail("remaining %d, want %d free slots", res.Remaining, max(0, slots-held))
		}
		if want := int64(0); held > 0 {
			want = ref.expiries[len(ref.expiries)-1] - now
			if res.ResetAfter != time.Duration(want)*time.Microsecond {
				fail("reset after %s, want %d µs (the newest slot's expiry)", res.ResetAfter, want)
			}
		} else if res.ResetAfter != 0 {
			fail("reset after %s with no slot held", res.ResetAfter)
		}
		if !res.Allowed && cost <= slots {
			checkRetry(t, probe, l, cost, now, res.RetryAfter, fail)
		}
	}
}

// checkRetry requires that the same hit, refused at now, is allowed after
// retry and still refused 1 µs before, on a copy of the key's state.
func checkRetry(t *testing.T, probe model, l limits.Limit, cost, now int64, retry time.Duration, fail func(string, ...any)) {
	t.Helper()
	at := now + retry.Microseconds()
	if retry <= 0 {
		fail("refused with no wait")
	}
	before := probe.clone()
	if d := before.decide(l, cost, at-1, 0); d.Result.Allowed {
		fail("allowed 1 µs before its retry after %s", retry)
	}
	if d := probe.decide(l, cost, at, 0); !d.Result.Allowed {
		fail("still refused after its retry after %s", retry)
	}
}
