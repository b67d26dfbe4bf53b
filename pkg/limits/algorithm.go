package limits

import (
	"math"
	"time"
)

// State is what a store keeps under one key. Its fields mean different things
// per algorithm; the zero value (Live false) is an absent key.
type State struct {
	// Live is false for a key that does not exist.
	Live bool
	// Window is the index floor(now/T) of the window that Count belongs to
	// (fixed and sliding windows).
	Window int64
	// Count is the hits counted in Window.
	Count int64
	// Prev is the hits counted in window Window-1 (sliding window).
	Prev int64
	// TAT is a bucket's theoretical arrival time (GCRA), in nanoseconds
	// since the epoch: the instant a token bucket is full again, or a
	// leaky bucket's queue empty. One integer, which the Redis store keeps
	// and moves with native commands.
	TAT int64
	// Log holds a sliding log's allowed hits, oldest first; Count is the sum
	// of their costs.
	Log []LogEntry
	// LockEnd is the instant, in microseconds, a lockout's lock ends
	// (Limit.BlockFor): the key is refused before it. Zero, or at most
	// now: not locked.
	LockEnd int64
	// logDead is how many entries that have left the window still sit in
	// Log's array before Log[0]: allocated, but out of Log's reach.
	logDead int
}

// LogRoom is the number of entries the array under s.Log holds: its
// capacity, plus the entries before Log[0] that have left the window. It is
// the memory a sliding log keeps, which a store bounding its memory counts.
func (s State) LogRoom() int { return s.logDead + cap(s.Log) }

// LogEntry is one allowed hit of a sliding log.
type LogEntry struct {
	// At is the hit's instant in microseconds.
	At int64
	// Cost is what the hit consumed.
	Cost int64
}

// Decision is the outcome of Decide: the answer, the state to keep and when
// that state stops mattering.
type Decision struct {
	Result Result
	// State is the new state; store it only if Changed.
	State   State
	Changed bool
	// ExpireAt is the instant, in microseconds, after which State is
	// equivalent to an absent key. Zero or at most now: delete the key.
	ExpireAt int64
	// Locks reports a lockout's refusal that starts a lock: its State (the
	// old one, or its count_refused charge, with the lock's end) is kept
	// even when the hit's joint run is refused, since the lock is this
	// limit's own.
	Locks bool
}

// Decide applies hit cost to state s of limit l at instant now (microseconds
// since the epoch). It is a pure function: the embedded store calls it inside
// a critical section, and so does the Redis store, on the state that Redis's
// native commands answered, so that both stores make identical decisions.
//
// A sliding log's State.Log may share storage with the returned State's: a
// store that keeps the old state after a refusal must not look at the new
// one, and one that keeps the new state must drop the old.
func Decide(l Limit, s State, cost int64, now int64) Decision {
	return DecideWithin(l, s, cost, now, 0)
}

// DecideWithin is Decide for a caller that can wait at most maxDelay
// microseconds for a leaky bucket's turn (its deadline); a longer wait is a
// refusal. Zero means no bound beyond the bucket's own queue.
func DecideWithin(l Limit, s State, cost, now, maxDelay int64) Decision {
	if l.Blocks() {
		// Nothing is counted and nothing would ever fit: the key is left
		// as it is, and its remaining, 0, is already its maximum.
		return Decision{}
	}
	if l.BlockFor > 0 {
		return lockout(l, s, cost, now, maxDelay)
	}
	if !l.Algorithm.Implemented() {
		return slidingWindow(l, s, cost, now, maxDelay)
	}
	return algorithms[l.Algorithm].decide(l, s, cost, now, maxDelay)
}

// charged reports whether a refused hit still consumes: count_refused
// counts every positive hit, as envoyproxy/ratelimit does and as an
// after-the-fact charge (Envoy's apply_on_stream_done) needs.
func charged(l Limit, allowed bool, cost int64) bool {
	return !allowed && l.CountRefused && cost > 0
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// fixedWindow counts hits in epoch-aligned windows floor(now/T), or in a
// calendar's windows (WindowFrame).
func fixedWindow(l Limit, s State, cost, now, _ int64) Decision {
	n, f := l.Requests, WindowFrame(l, now)
	w, end := f.W, f.End
	count := int64(0)
	if s.Live && s.Window == w {
		count = s.Count
	}
	need := max(cost, 1)
	d := Decision{}
	switch {
	case cost < 0:
		count = max(0, count+cost)
		d.Result.Allowed = true
		d.Changed = true
	case cost > n:
		// Can never fit: refused, key untouched.
	case count+need <= n:
		d.Result.Allowed = true
		if cost > 0 {
			count += cost
			d.Changed = true
		}
	}
	if charged(l, d.Result.Allowed, cost) {
		// At most one period's worth of debt.
		count = min(count+cost, 2*n)
		d.Changed = true
	}
	d.Result.Remaining = max(0, n-count)
	if count > 0 {
		d.Result.ResetAfter = micros(end - now)
	}
	if !d.Result.Allowed && cost <= n {
		d.Result.RetryAfter = micros(end - now)
	}
	if d.Changed {
		d.State = State{Live: count > 0, Window: w, Count: count}
		if count > 0 {
			d.ExpireAt = end
		}
	}
	return d
}

// slidingWindow is Cloudflare's two-counter estimate:
// prev × (T − elapsed)/T + cur, computed in float64 in this exact order of
// operations. In a calendar's windows T is the current window's real
// length, and the wait into the next window is reckoned with that one's.
func slidingWindow(l Limit, s State, cost, now, _ int64) Decision {
	n, f := l.Requests, WindowFrame(l, now)
	w, t, tn := f.W, f.Len(), f.NextLen()
	e := now - f.Start
	var cur, prev int64
	if s.Live {
		switch s.Window {
		case w:
			cur, prev = s.Count, s.Prev
		case w - 1:
			prev = s.Count
		}
	}
	need := max(cost, 1)
	d := Decision{}
	switch {
	case cost < 0:
		cur = max(0, cur+cost)
		d.Result.Allowed = true
		d.Changed = true
	case cost > n:
		// Can never fit.
	case slidingFits(n, t, prev, cur, e, need):
		d.Result.Allowed = true
		if cost > 0 {
			cur += cost
			d.Changed = true
		}
	}
	if charged(l, d.Result.Allowed, cost) {
		// At most one period's worth of debt.
		cur = min(cur+cost, 2*n)
		d.Changed = true
	}
	est := slidingWeight(t, prev, e) + float64(cur)
	d.Result.Remaining = max(0, int64(math.Floor(float64(n)-est)))
	// Waits count from the state that stays, a count_refused charge
	// included.
	switch {
	case cur > 0:
		d.Result.ResetAfter = micros(f.Next - now)
	case prev > 0:
		d.Result.ResetAfter = micros(f.End - now)
	}
	if !d.Result.Allowed && cost <= n {
		d.Result.RetryAfter = micros(slidingWait(n, t, tn, prev, cur, e, need))
	}
	if d.Changed {
		d.State = State{Live: cur > 0 || prev > 0, Window: w, Count: cur, Prev: prev}
		switch {
		case cur > 0:
			d.ExpireAt = f.Next
		case prev > 0:
			d.ExpireAt = f.End
		}
	}
	return d
}

// slidingWeight is the previous window's share of the estimate at elapsed e.
func slidingWeight(t, prev, e int64) float64 {
	return float64(prev) * float64(t-e) / float64(t)
}

func slidingFits(n, t, prev, cur, e, need int64) bool {
	return slidingWeight(t, prev, e)+float64(cur)+float64(need) <= float64(n)
}

// slidingWait is the shortest wait, in microseconds, after which a hit of
// cost need (≤ n) fits, if nothing else arrives, e into a window of length
// t followed by one of length tn. The closed form is rounded up and then
// checked with slidingFits itself, so that waiting the answer always
// suffices, whatever the rounding of the division.
func slidingWait(n, t, tn, prev, cur, e, need int64) int64 {
	// Within the current window, the previous window's weight decays.
	if room := n - need - cur; room >= 0 && prev > 0 {
		wait := (t - e) - int64(math.Floor(float64(room)*float64(t)/float64(prev)))
		wait = max(wait, 0)
		for wait < t-e && !slidingFits(n, t, prev, cur, e+wait, need) {
			wait++
		}
		if wait < t-e {
			return wait
		}
	}
	// In the next window the current count becomes the previous one. Its
	// first instant is checked with slidingFits too: when cur·T is beyond
	// 2^53, cur·T/T can round above cur.
	if tn == 0 {
		// A calendar day that its zone skipped (Pacific/Apia's 2011-12-30):
		// the current count is a previous window's for no instant.
		return t - e
	}
	if cur+need <= n && slidingFits(n, tn, cur, 0, 0, need) {
		return t - e
	}
	e2 := tn - int64(math.Floor(float64(n-need)*float64(tn)/float64(cur)))
	e2 = max(e2, 0)
	for e2 < tn && !slidingFits(n, tn, cur, 0, e2, need) {
		e2++
	}
	return t - e + e2
}

// Interval is a bucket's time per token (token bucket) or per turn (leaky
// bucket) in nanoseconds: T/N rounded down to a whole nanosecond, and at
// least one. A bucket keeps its state as a theoretical arrival time in
// nanoseconds (GCRA) and moves it by whole intervals, so that its every
// value is an integer, which Redis's native commands move too; rounding
// down refills up to a nanosecond per token sooner than T/N (a relative
// 10^-9·N/T: 0.1% at a million per second), rounding up would report waits a
// microsecond longer than whole periods (3 per second would be full again
// after 1.000001 s). Rates above one per nanosecond are one per nanosecond.
func Interval(l Limit) int64 {
	return max(1, l.Period.Nanoseconds()/l.Requests)
}

// nanos is an instant or wait of microseconds in nanoseconds.
func nanos(us int64) int64 { return us * 1000 }

// microsUp is a wait of ns nanoseconds as a Duration, rounded up to the
// microsecond, the resolution of every answer: waiting it always suffices.
func microsUp(ns int64) time.Duration { return micros(ceilDiv(ns, 1000)) }

// ceilDiv is ceil(a/b) for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// tokenBucket refills one token every Interval up to B (GCRA): the state is
// the instant tat at which the bucket is full again, and the bucket holds
// B − (tat − now)/I tokens at now. A hit of cost c fits if c tokens are
// there, tat ≤ now + (B − c)·I, and moves tat on by c·I from now or tat,
// whichever is later.
func tokenBucket(l Limit, s State, cost, now, _ int64) Decision {
	n, b, i := l.Requests, l.Capacity(), Interval(l)
	t := nanos(now)
	tat := t
	if s.Live {
		tat = max(s.TAT, t)
	}
	need := max(cost, 1)
	d := Decision{}
	switch {
	case cost < 0:
		// Tokens come back up to B: tat no earlier than now. A refund of
		// more than B + N tokens gives as much as B + N.
		tat = max(tat-min(-cost, b+n)*i, t)
		d.Result.Allowed = true
		d.Changed = true
	case cost > b:
		// Can never fit.
	case tat+need*i <= t+b*i:
		d.Result.Allowed = true
		if cost > 0 {
			tat += cost * i
			d.Changed = true
		}
	}
	if charged(l, d.Result.Allowed, cost) {
		// At most one period's worth (N tokens) of debt.
		tat = min(tat+min(cost, b+n)*i, t+(b+n)*i)
		d.Changed = true
	}
	d.Result.Remaining = max(0, b-ceilDiv(tat-t, i))
	// Waits are measured from the state the store will keep: the new one
	// if it changed, the old one otherwise.
	kept := tat
	if !d.Changed && s.Live {
		kept = s.TAT
	}
	if kept > t {
		d.Result.ResetAfter = microsUp(kept - t)
	}
	if !d.Result.Allowed && cost <= b {
		d.Result.RetryAfter = microsUp(kept - t - (b-need)*i)
	}
	if d.Changed {
		d.State = State{Live: tat > t, TAT: tat}
		if tat > t {
			d.ExpireAt = ceilDiv(tat, 1000)
		}
	}
	return d
}

// leakyBucket shapes: a queue of at most B requests drains at N/T, one every
// I = Interval nanoseconds (GCRA-style: the state is the instant the queue
// is empty again). A request that fits is allowed after Result.Delay, its
// turn; one that does not fit, or whose turn comes after maxDelay
// microseconds, is refused at once. A request of cost c takes c turns; it
// fits when its last turn is within the queue, so with B = 0 requests are
// spaced at least I apart.
func leakyBucket(l Limit, s State, cost, now, maxDelay int64) Decision {
	n, b, i := l.Requests, l.Burst, Interval(l)
	t := nanos(now)
	drain := t
	if s.Live {
		drain = max(s.TAT, t)
	}
	wait := drain - t
	need := max(cost, 1)
	d := Decision{}
	switch {
	case cost < 0:
		drain = max(drain-min(-cost, b+n+1)*i, t)
		d.Result.Allowed = true
		d.Changed = true
	case need-1 > b:
		// Can never fit: more turns than the queue holds.
	case leakyFits(wait, need, b, i, maxDelay):
		d.Result.Allowed = true
		if cost > 0 {
			// A peek takes no turn, so it does not wait for one.
			d.Result.Delay = microsUp(wait)
			drain += cost * i
			d.Changed = true
		}
	}
	if charged(l, d.Result.Allowed, cost) {
		// At most one period's worth (N turns) of debt beyond a full queue.
		drain = min(drain+min(cost, b+n+1)*i, t+(b+n)*i)
		d.Changed = true
	}
	backlog := drain - t
	// Free places in the queue: the request in service is not queued.
	d.Result.Remaining = max(0, min(b, b+1-ceilDiv(backlog, i)))
	if backlog > i {
		d.Result.ResetAfter = microsUp(backlog - i)
	}
	if !d.Result.Allowed && need-1 <= b {
		d.Result.RetryAfter = microsUp(leakyWait(backlog, need, b, i, maxDelay))
	}
	if d.Changed {
		d.State = State{Live: backlog > 0, TAT: drain}
		if backlog > 0 {
			d.ExpireAt = ceilDiv(drain, 1000)
		}
	}
	return d
}

// leakyFits reports whether a request whose turn is wait nanoseconds away
// fits: its last turn within the queue, its first within the caller's
// deadline (maxDelay microseconds, 0: none).
func leakyFits(wait, need, b, i, maxDelay int64) bool {
	if maxDelay > 0 && wait > nanos(maxDelay) {
		return false
	}
	return wait+(need-1)*i <= b*i
}

// leakyWait is the shortest wait, in nanoseconds, after which a request
// refused with backlog fits.
func leakyWait(backlog, need, b, i, maxDelay int64) int64 {
	over := backlog + (need-1)*i - b*i
	if maxDelay > 0 {
		over = max(over, backlog-nanos(maxDelay))
	}
	return max(0, over)
}

// floorDiv is floor(a/b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}
