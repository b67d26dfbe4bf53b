package limits

import "time"

// The arithmetic of holds (hold.go), as pure functions of a key's state and
// the instant, beside Decide: every store keeps a live hold as a
// Reservation and decides with these, so that the embedded store and the
// Redis store give back and charge alike. Each algorithm's own decision
// stays Decide's; these only say which decision a reserve, a repeat, a
// settle and a lapse are.

// Reservation is a live hold as a store keeps it: its cost, the instant it
// was reserved at and the end of its lease, in microseconds.
type Reservation struct {
	Cost, At, Until int64
}

// NewReservation is the hold that a reserve of cost admitted at now keeps
// for lease. On a concurrency limit it ends with its slots, at the earlier
// of the limit's lease and the hold's.
func NewReservation(l Limit, cost, now int64, lease time.Duration) Reservation {
	until := now + lease.Microseconds()
	if l.Algorithm == Concurrency {
		until = min(until, now+l.PeriodMicros())
	}
	return Reservation{Cost: cost, At: now, Until: until}
}

// Lapsed reports whether r's lease has ended at now.
func (r Reservation) Lapsed(now int64) bool { return now >= r.Until }

// ReserveLimit is the limit a reserve of lease is decided with: l without
// count_refused, since a reserve is all or nothing (refused, it neither
// holds nor charges anything, so that the settle Envoy sends when a
// refused request ends finds nothing to give back), and on a concurrency
// limit with its slots' lease cut to the hold's.
func ReserveLimit(l Limit, lease time.Duration) Limit {
	l.CountRefused = false
	if l.Algorithm == Concurrency && lease < l.Period {
		l.Period = lease
	}
	return l
}

// Repeated is the answer to a reserve of an id that the key already holds:
// what a peek at s reads at now (Remaining, ResetAfter), allowed, since the
// first reserve was. It changes nothing, and starts no lock.
func Repeated(l Limit, s State, now int64) Result {
	r := DecideWithin(l, s, 0, now, 0).Result
	return Result{Allowed: true, Remaining: r.Remaining, ResetAfter: r.ResetAfter}
}

// Settle is the decision of a settle of cost at now on state s, whose id
// holds r: r's cost given back (GiveBack), then cost charged at now
// whether it fits or not, as a count_refused hit, the answer saying
// whether it fitted (with no Delay: the request has been served). On a
// concurrency limit only r's slots are freed and nothing is charged: the
// answer is allowed, with what is left. On a lockout the algorithm's state
// is given back and charged, and the lock is left as it is: a settle
// neither starts, lifts nor lengthens one.
func Settle(l Limit, s State, r Reservation, cost, now int64) Decision {
	g := GiveBack(l, s, r, now)
	if g.Changed {
		s = g.State
	}
	if l.Algorithm == Concurrency {
		g.Result = Repeated(l, s, now)
		return g
	}
	inner := l
	inner.BlockFor, inner.CountRefused = 0, true
	d := keepLock(l, s, DecideWithin(inner, s, cost, now, 0), now)
	d.Result.Delay = 0
	if !d.Changed && g.Changed {
		d.State, d.ExpireAt, d.Changed = g.State, g.ExpireAt, true
	}
	return d
}

// Unheld is the decision of a settle of cost at now that finds no live
// hold of its id: a plain hit of cost, exactly as without a Hold, except
// on a concurrency limit, where it frees nothing (a settle names its
// slots; a release of the oldest would free another request's) and is
// answered allowed.
func Unheld(l Limit, s State, cost, now, maxDelay int64) Decision {
	if l.Algorithm == Concurrency {
		return Decision{Result: Repeated(l, s, now)}
	}
	return DecideWithin(l, s, cost, now, maxDelay)
}

// GiveBack is the decision that gives r's cost back to state s of l at
// now, by a settle or at the lapse of r's lease. A window limit gives it
// back to the window of r's instant (nothing, once that window no longer
// counts); a sliding log takes it out of its entries of r's instant (what
// of them is still in the log: taking newer entries would count less than
// was charged); a concurrency limit frees r's slots, those that expire at
// r.Until; a bucket refunds it at now. A lock is left as it is. Its
// Result means nothing; Changed is false when nothing is given back.
func GiveBack(l Limit, s State, r Reservation, now int64) Decision {
	if l.Blocks() || r.Cost <= 0 || !s.Live {
		return Decision{}
	}
	inner := l
	inner.BlockFor = 0
	var d Decision
	switch l.Algorithm {
	case FixedWindow, SlidingWindow:
		d = windowGiveBack(inner, s, r, now)
	case SlidingLog:
		// A log's entries live while their instant is within a period of
		// now: SlotsHeld's test, at now less the period.
		live, _ := SlotsHeld(s, now-l.PeriodMicros())
		d = entriesGiveBack(s, live, r.At, r.Cost, l.PeriodMicros())
	case Concurrency:
		live, _ := SlotsHeld(s, now)
		d = entriesGiveBack(s, live, r.Until, r.Cost, 0)
	default:
		d = DecideWithin(inner, s, -r.Cost, now, 0)
	}
	return keepLock(l, s, d, now)
}

// keepLock keeps the lock of s in d, a decision of l's algorithm alone.
func keepLock(l Limit, s State, d Decision, now int64) Decision {
	if l.BlockFor > 0 && d.Changed && s.Live && s.LockEnd > now {
		d.State.Live, d.State.LockEnd = true, s.LockEnd
		d.ExpireAt = max(d.ExpireAt, s.LockEnd)
	}
	return d
}

// windowGiveBack gives r's cost back to the window of r.At, when s still
// counts it: as the current window's count, or a sliding window's
// previous one.
func windowGiveBack(l Limit, s State, r Reservation, now int64) Decision {
	w0 := WindowFrame(l, r.At).W
	ns := s
	switch {
	case s.Window == w0:
		ns.Count = max(0, s.Count-r.Cost)
	case s.Window == w0+1 && l.Algorithm == SlidingWindow:
		ns.Prev = max(0, s.Prev-r.Cost)
	default:
		return Decision{}
	}
	if ns.Count == s.Count && ns.Prev == s.Prev {
		return Decision{}
	}
	d := Decision{State: ns, Changed: true, ExpireAt: windowExpiry(l, ns, now)}
	d.State.Live = d.ExpireAt > now && (ns.Count > 0 || ns.Prev > 0)
	if !d.State.Live {
		d.ExpireAt = 0
	}
	return d
}

// entriesGiveBack takes up to cost out of live's entries at instant at (a
// sliding log's entries by their instant, whose state expires period after
// its newest; a concurrency limit's by their expiry, period 0), in a new
// array.
func entriesGiveBack(s State, live []LogEntry, at, cost, period int64) Decision {
	out := make([]LogEntry, 0, len(live))
	total, taken := int64(0), int64(0)
	for _, e := range live {
		if e.At == at && taken < cost {
			take := min(e.Cost, cost-taken)
			e.Cost -= take
			taken += take
		}
		if e.Cost > 0 {
			out = append(out, e)
			total += e.Cost
		}
	}
	if taken == 0 {
		return Decision{}
	}
	d := Decision{Changed: true, State: State{Live: len(out) > 0, Count: total, Log: out, LockEnd: s.LockEnd}}
	if len(out) > 0 {
		d.ExpireAt = out[len(out)-1].At + period
	}
	return d
}
