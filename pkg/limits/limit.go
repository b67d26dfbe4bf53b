package limits

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Algorithm names how a limit counts.
type Algorithm uint8

// The algorithms. The zero value is SlidingWindow, the default of the limits
// file.
const (
	SlidingWindow Algorithm = iota
	FixedWindow
	TokenBucket
	SlidingLog
	LeakyBucket
	// Concurrency counts slots held, not hits per period (concurrency.go).
	Concurrency
)

// String returns the name used in the limits file.
func (a Algorithm) String() string {
	if a.Implemented() {
		return algorithms[a].name
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ShortName is the compact tag used inside store keys.
func (a Algorithm) ShortName() string {
	if a.Implemented() {
		return algorithms[a].short
	}
	return "xx"
}

// ParseAlgorithm maps a limits-file name to an Algorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	names := make([]string, len(algorithms))
	for i, k := range algorithms {
		if k.name == s {
			return Algorithm(i), nil
		}
		names[i] = k.name
	}
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", s, strings.Join(names, ", "))
}

// Implemented reports whether the algorithm can be decided by this build:
// whether it has an entry in the table of algorithms. The limits file
// refuses algorithms that are not implemented yet, so that a file never
// silently loads a limit that nothing enforces.
func (a Algorithm) Implemented() bool {
	return int(a) < len(algorithms)
}

// Limit is one rate limit: Requests per Period, counted by Algorithm.
// It is a small value type, safe to copy and to share between goroutines.
type Limit struct {
	Algorithm Algorithm
	// Requests is N, the number of hits allowed per Period.
	Requests int64
	// Period is T, the unit times the unit multiplier. Always at least a
	// microsecond for a valid limit. A concurrency limit's Period is its
	// lease, the longest a slot is held.
	Period time.Duration
	// Burst is B: the capacity of a token bucket (zero means Requests), the
	// queue length of a leaky bucket (zero: no queue). Windows ignore it.
	Burst int64
	// CountRefused makes refused hits consume too (down to one period's
	// worth of debt), as envoyproxy/ratelimit counts and as a charge made
	// after the response must.
	CountRefused bool
	// BlockFor, when positive, makes the limit a lockout: once it refuses
	// a hit, its key stays refused for BlockFor from that refusal,
	// whatever its algorithm's state says (lockout.go). Zero: none.
	BlockFor time.Duration
	// Calendar, when on, makes a window limit count in the windows of a
	// calendar in a time zone (calendar.go); Period is then the unit's
	// nominal length.
	Calendar Calendar
	// SyncInterval, when positive, puts the limit in the hot-key mode
	// (sync.go): an instance decides most hits of a key from a share of
	// the limit it took from Redis, and goes back to Redis at least once
	// per SyncInterval. Zero: every hit is decided by the store.
	SyncInterval time.Duration
}

// String renders the limit for logs and /rlconfig.
func (l Limit) String() string {
	s := fmt.Sprintf("%s %d/%s", l.Algorithm, l.Requests, l.Period)
	if l.Algorithm == Concurrency {
		s = fmt.Sprintf("%s %d lease=%s", l.Algorithm, l.Requests, l.Period)
	}
	if l.Algorithm == TokenBucket || l.Algorithm == LeakyBucket {
		s += fmt.Sprintf(" burst=%d", l.Capacity())
	}
	if l.CountRefused {
		s += " count_refused"
	}
	if l.BlockFor > 0 {
		s += " block_for=" + l.BlockFor.String()
	}
	if l.Calendar.On() {
		s += " " + l.Calendar.String()
	}
	if l.SyncInterval > 0 {
		s += " sync_interval=" + l.SyncInterval.String()
	}
	return s
}

// Blocks reports whether the limit is a block rule: requests_per_unit 0,
// envoyproxy/ratelimit's way to refuse every request. Every hit of a
// block rule is refused, whatever its algorithm, burst or cost, and no
// store keeps anything for it.
func (l Limit) Blocks() bool { return l.Requests == 0 }

// Capacity is the largest value remaining can take: B for the buckets (N
// for a token bucket whose Burst is zero), N for the windows and the log;
// 0 for a block rule.
func (l Limit) Capacity() int64 {
	switch {
	case l.Blocks():
		return 0
	case l.Algorithm == LeakyBucket:
		return l.Burst
	case l.Algorithm == TokenBucket && l.Burst > 0:
		return l.Burst
	}
	return l.Requests
}

// MaxCost is the largest cost a hit can ever be allowed: Capacity, except
// for a leaky bucket, whose request in service is not in the queue.
func (l Limit) MaxCost() int64 {
	if l.Algorithm == LeakyBucket && !l.Blocks() {
		return l.Burst + 1
	}
	return l.Capacity()
}

// MaxWait is the longest a leaky bucket may delay a request, B × T/N; zero
// for the other algorithms.
func (l Limit) MaxWait() time.Duration {
	if l.Algorithm != LeakyBucket || l.Blocks() {
		return 0
	}
	return time.Duration(float64(l.Burst) * float64(l.Period) / float64(l.Requests))
}

// PeriodMicros is T in integer microseconds.
func (l Limit) PeriodMicros() int64 { return l.Period.Microseconds() }

// AppendPeriod appends to dst what a store key says of l's period: T in
// microseconds, followed by what a modifier that numbers windows apart
// from floor(now/T) adds (Calendar.appendKey). It is called directly, not
// through Modifiers, so that a key built in a stack buffer stays there.
func (l Limit) AppendPeriod(dst []byte) []byte {
	dst = strconv.AppendInt(dst, l.PeriodMicros(), 10)
	return l.Calendar.appendKey(dst)
}

// Validate reports why a limit cannot be decided, or nil. The error is a
// *FieldError.
func (l Limit) Validate() error {
	if err := l.validateBlockFor(); err != nil {
		return err
	}
	switch {
	case !l.Algorithm.Implemented():
		return fieldErrorf("algorithm", "%s is not implemented yet", l.Algorithm)
	case l.Requests < 0:
		return fieldErrorf("requests_per_unit", "must not be negative, got %d", l.Requests)
	case l.Requests > MaxRequests:
		return fieldErrorf("requests_per_unit", "%d is above the maximum %d", l.Requests, MaxRequests)
	case l.Period < time.Microsecond:
		return fieldErrorf("period", "%s is shorter than a microsecond", l.Period)
	case l.Period > MaxPeriod:
		return fieldErrorf("period", "%s is longer than the maximum %s", l.Period, MaxPeriod)
	case l.Burst < 0:
		return fieldErrorf("burst", "must not be negative, got %d", l.Burst)
	case l.Burst > MaxRequests:
		return fieldErrorf("burst", "%d is above the maximum %d", l.Burst, MaxRequests)
	}
	if err := l.validateCalendar(); err != nil {
		return err
	}
	if err := l.validateSyncInterval(); err != nil {
		return err
	}
	switch {
	case l.Blocks():
		// The bounds below divide by N; a block rule refuses all alike.
		return nil
	case l.Algorithm == LeakyBucket && l.Period < MinLeakyInterval*time.Duration(l.Requests):
		// The queue's drain time is a float64 of absolute microseconds (a
		// quarter-microsecond resolution today): turns much shorter than a
		// microsecond would round away.
		return fieldErrorf("requests_per_unit", "%d per %s is a turn every %s, shorter than a leaky_bucket's minimum %s: use token_bucket", l.Requests, l.Period, l.Period/time.Duration(l.Requests), MinLeakyInterval)
	case l.Algorithm == Concurrency && l.Requests > MaxSlots:
		return fieldErrorf("requests_per_unit", "%d is above %d, the most slots a concurrency limit keeps (one expiry instant per slot)", l.Requests, MaxSlots)
	case l.Algorithm == Concurrency && l.Burst != 0:
		return fieldErrorf("burst", "concurrency takes no burst: its slots are requests_per_unit")
	case l.Algorithm == SlidingLog && l.Requests > MaxLogRequests:
		return fieldErrorf("requests_per_unit", "%d is above %d, the most a sliding_log keeps (one entry per hit): use sliding_window", l.Requests, MaxLogRequests)
	case float64(l.Capacity())*float64(l.Period)/float64(l.Requests) > float64(MaxPeriod):
		// The time to refill an empty bucket must stay a valid duration.
		return fieldErrorf("burst", "%d takes longer than %s to refill at %d per %s", l.Capacity(), MaxPeriod, l.Requests, l.Period)
	}
	return nil
}

// FieldError is why Validate refuses a limit: the field at fault, by its
// name in a limits file, and what is wrong with it, so that the config
// loader can point at that field without reading the message.
type FieldError struct {
	// Field is requests_per_unit, burst, period (unit × unit_multiplier),
	// unit, algorithm, unit_multiplier, or a field of a modifier
	// (Modifiers).
	Field string
	// Msg says what is wrong with the field's value.
	Msg string
	// AtName makes the error about the field as a whole (that it is there
	// at all): a loader points at its name rather than at its value.
	AtName bool
}

// fieldErrorf is a *FieldError about field.
func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Error reads "FIELD MSG", such as "burst must not be negative, got -1".
func (e *FieldError) Error() string { return e.Field + " " + e.Msg }

// The bounds keep instants and waits, in microseconds, inside 2^53, so that
// a double represents them exactly (the sliding window's estimate is
// computed in float64). Intermediate products (prev × (T − e) of the
// sliding window) may exceed 2^53; the waits are checked against the
// decision function itself, so a reported wait always suffices.
const (
	// MaxRequests bounds requests_per_unit and burst (also Envoy's uint32).
	MaxRequests = 1 << 32
	// MaxPeriod bounds unit × unit_multiplier: 10 years, so that window
	// ends (w+2)·T stay below 2^53 microseconds for centuries.
	MaxPeriod = 10 * 365 * 24 * time.Hour
	// MaxLogRequests bounds a sliding_log's requests_per_unit: it keeps one
	// entry per allowed hit (a sorted-set member in Redis, which
	// redisstore's TestMemoryUsage weighs, a 16-byte LogEntry in the
	// embedded store), and a decision that refuses walks the oldest entries.
	MaxLogRequests = 10_000
	// MinLeakyInterval bounds a leaky bucket's turn T/N from below (at most
	// 10,000 per second): shaping finer than that is lost in the network's
	// jitter anyway, and it keeps the float rounding of the drain time
	// below 0.2% of a turn.
	MinLeakyInterval = 100 * time.Microsecond
	// MaxSlots bounds a concurrency limit's requests_per_unit, its slots:
	// it keeps one expiry instant per slot held (a sorted-set member in
	// Redis, as a sliding_log's entries), and a refusal walks the oldest.
	MaxSlots = 10_000
)
