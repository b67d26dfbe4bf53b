package hotkey

import (
	"math"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// entry is what an instance holds of one key of the mode. Its fields are
// guarded by its shard's mutex.
type entry struct {
	limit limits.Limit
	// left is the share held here: charged in Redis, not yet admitted.
	left int64
	// expires is when the share stops being used without a sync: one
	// interval after it was taken, and never past its window's end.
	expires time.Time
	// windowEnd is, for a window, the end of the window the share was
	// charged in (local clock, from before the charge was sent, so never
	// later than Redis's); zero before the first share.
	windowEnd time.Time
	// remaining is what Redis said remains of the limit (after the share),
	// learned at remainingAt; resetAt is when it said the key is full.
	remaining   int64
	remainingAt time.Time
	resetAt     time.Time
	// used is the cost asked of the key here since since: the rate the
	// next share is sized from.
	since time.Time
	used  int64
	// lastUse is the last hit's instant: an entry idle for a period and an
	// interval holds nothing worth keeping.
	lastUse time.Time
	// wait, while a sync is in flight, is closed when it is done.
	wait chan struct{}
}

// window reports whether the entry's limit counts in windows (not a
// bucket).
func (e *entry) window() bool { return e.limit.Algorithm != limits.TokenBucket }

// idle reports whether the entry may be dropped.
func (e *entry) idle(now time.Time) bool {
	return e.wait == nil && now.Sub(e.lastUse) > e.limit.Period+e.limit.SyncInterval
}

// usable reports whether cost can be admitted from the share at now. A
// window's share stays usable while its sync is in flight, until its
// window ends: it is counted in that window whenever it is used.
func (e *entry) usable(cost int64, now time.Time) bool {
	if e.left < cost {
		return false
	}
	if now.Before(e.expires) {
		return true
	}
	return e.wait != nil && e.window() && now.Before(e.windowEnd)
}

// admit takes cost from the share and answers the hit: Remaining is what
// Redis said remains besides the shares, plus this instance's.
func (e *entry) admit(cost int64, now time.Time) limits.Result {
	e.left -= cost
	e.used += cost
	return limits.Result{
		Allowed:    true,
		Remaining:  min(e.limit.Capacity(), e.remaining+e.left),
		ResetAfter: max(0, e.resetAt.Sub(now)),
	}
}

// carry is what is left of a window's share that may be kept into the
// next interval: all of it until its window ends. A bucket's share is
// never carried: its tokens were taken at its start, and a bucket refills,
// so they are given back instead.
func (e *entry) carry(now time.Time) int64 {
	if !e.window() || !now.Before(e.windowEnd) {
		return 0
	}
	return e.left
}

// want is the share worth holding for the next interval, the hit of cost
// included: twice what the key was asked here per interval since the last
// share (at most sixteen times what was asked, for a share used up at
// once), at most a quarter of what Redis is thought to have left, so that
// a few instances taking shares at once still fit. A key seen for the
// first time, or after a few idle intervals, starts a new measure and
// wants no share (cost alone).
func (e *entry) want(cost int64, now time.Time) int64 {
	si := e.limit.SyncInterval
	el := now.Sub(e.since)
	if e.since.IsZero() || el > 4*si {
		e.since, e.used = now, cost
		return cost
	}
	e.used += cost
	el = max(el, si/8)
	w := math.Ceil(2 * float64(e.used) * float64(si) / float64(el))
	return min(int64(min(w, math.MaxInt32)), e.left4(now))
}

// left4 is a quarter of what Redis is thought to have left at now.
func (e *entry) left4(now time.Time) int64 { return e.thought(now) / 4 }

// thought is what Redis is thought to have left of the key at now: what
// it said last, or the whole limit once a window it was said in has
// ended; a bucket's grows back at its rate.
func (e *entry) thought(now time.Time) int64 {
	l, rem := e.limit, e.remaining
	switch {
	case e.window() && !e.windowEnd.IsZero() && e.remainingAt.Before(e.windowEnd) && !now.Before(e.windowEnd):
		rem = l.Capacity()
	case !e.window():
		back := float64(now.Sub(e.remainingAt)) / float64(l.Period) * float64(l.Requests)
		rem = min(l.Capacity(), rem+int64(min(back, float64(l.Capacity()))))
	}
	return rem
}

// giveBack is how much of a bucket's unused share is worth a refund: none
// once the bucket is thought to have refilled past it, since a refund
// never fills a bucket beyond its capacity (and keeping tokens taken is
// never more than the limit allows).
func (e *entry) giveBack(now time.Time) int64 {
	if e.window() || e.left <= 0 || e.thought(now)+e.left >= e.limit.Capacity() {
		return 0
	}
	return e.left
}

// learn keeps what Redis said remains of the key.
func (e *entry) learn(r limits.Result, sent time.Time) {
	e.remaining, e.remainingAt, e.resetAt = r.Remaining, sent, sent.Add(r.ResetAfter)
}

// grant adds a charge Redis allowed to the share. A window's share holds
// until the end of the window Redis counted it in (ResetAfter counts to
// it, for a sliding window to the end of the next one); what was carried
// from another window (the charge landed past the end this instance
// thought) is dropped.
func (e *entry) grant(r limits.Result, sent time.Time, charged int64) {
	l := e.limit
	e.learn(r, sent)
	e.since, e.used = sent, 0
	e.expires = sent.Add(l.SyncInterval)
	if e.window() {
		end := sent.Add(r.ResetAfter)
		switch {
		case r.ResetAfter <= 0:
			end = sent
		case l.Algorithm == limits.SlidingWindow:
			end = end.Add(-l.Period)
		}
		if d := end.Sub(e.windowEnd); !e.windowEnd.IsZero() && (d > l.Period/2 || d < -l.Period/2) {
			e.left = 0
		}
		e.windowEnd = end
		if end.Before(e.expires) {
			e.expires = end
		}
	}
	e.left += charged
}
