package limits

import "time"

// MinSyncInterval bounds a limit's SyncInterval from below: Redis's TTLs
// and the service's timers are not finer than a millisecond, and a shorter
// interval would cost Redis about as much as a round trip per call.
const MinSyncInterval = time.Millisecond

// syncModifier is the hot-key mode's entry in Modifiers: sync_interval, a
// duration, lets each instance decide a key from what it holds of it and
// reconcile with Redis once per interval instead of once per call (package
// hotkey keeps those holdings; docs/semantics.md, "Hot keys", states what
// the mode can let through). It changes where a decision is made, not how
// the limit counts: the Redis counters are the plain limit's, so that
// instances with and without the mode agree.
var syncModifier = Modifier{
	Name: "sync_interval",
	Fields: []Field{{
		Name: "sync_interval", Type: Duration, Noun: "sync_interval",
		Without: map[Algorithm]string{Concurrency: "a slot must be taken and given back where every instance sees it"},
	}},
	On:    func(l Limit) bool { return l.SyncInterval > 0 },
	Build: func(l *Limit, r RuleFields) error { l.SyncInterval = r.value("sync_interval").Duration; return nil },
	clear: func(l *Limit) { l.SyncInterval = 0 },
	// Explained, an operator sees why the key's count in Redis can run
	// ahead of what this instance admitted (the shares taken ahead), and
	// what the mode can let through (docs/semantics.md, "Hot keys").
	Explain: func(l Limit, _ int64, e *ModifiersExplained) { e.SyncInterval = l.SyncInterval.String() },
	Text:    syncText,
}

// syncText is a hot-key limit's line in a text explanation.
func syncText(e ModifiersExplained) string {
	if e.SyncInterval == "" {
		return ""
	}
	return "hot key: sync_interval " + e.SyncInterval + ", decided on each instance from a share of the limit taken ahead from Redis, synced at least once per interval"
}

// validateSyncInterval checks SyncInterval: none, or an interval of at
// least MinSyncInterval and at most the limit's period (a longer one would
// hold a window's share past its end), on an algorithm whose state an
// instance can take a share of ahead: the windows' counts and the token
// bucket's tokens. A sliding log keeps each hit's instant, a leaky bucket
// each request's turn, and a lockout must refuse on every instance at once.
func (l Limit) validateSyncInterval() error {
	si := l.SyncInterval
	switch {
	case si == 0:
		return nil
	case si < MinSyncInterval:
		return fieldErrorf("sync_interval", "%s is shorter than %s", si, MinSyncInterval)
	case l.Algorithm != FixedWindow && l.Algorithm != SlidingWindow && l.Algorithm != TokenBucket:
		return fieldErrorf("sync_interval", "is for fixed_window, sliding_window and token_bucket only, not %s", l.Algorithm)
	case si > l.Period:
		return fieldErrorf("sync_interval", "%s is longer than the limit's period %s", si, l.Period)
	case l.Blocks():
		return fieldErrorf("sync_interval", "is not for a block rule (requests_per_unit 0 refuses every request without asking Redis)")
	case l.BlockFor > 0:
		return fieldErrorf("sync_interval", "is not for a lockout (block_for): a lock must refuse on every instance at once")
	case l.Calendar.On() && l.Algorithm == SlidingWindow:
		return fieldErrorf("sync_interval", "is not for a sliding_window on a calendar, whose next window's length an instance cannot read from Redis's answer")
	}
	return nil
}
