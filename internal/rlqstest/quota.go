// Package rlqstest is a simulated Envoy rate_limit_quota filter for tests:
// a real gRPC client of RateLimitQuotaService that reports usage and
// enforces the assignments it gets back the way Envoy 1.40 does, not the
// way the proto's comments describe. What it copies from Envoy, and why:
//
//   - one stream per simulated Envoy (Envoy opens one per server and
//     domain), with the domain on every message, opened with the report
//     timer at the first request;
//   - a bucket's first request sends an immediate report of that bucket
//     alone, with time_elapsed set to 0 s; then every bucket is reported
//     every report interval, time_elapsed cut to whole seconds (always
//     set, as Envoy sets it);
//   - only blanket_rule and token_bucket are enforced; an assignment of
//     requests_per_time_unit is skipped (the bucket keeps what it had), and
//     as a no-assignment behaviour it fails open;
//   - a token bucket refills continuously at tokens_per_fill per
//     fill_interval, the interval cut to whole seconds; below one second
//     Envoy divides by an interval of zero and gets an infinite rate, so
//     the bucket is always full;
//   - an identical token bucket keeps the bucket's tokens; a different one
//     replaces the bucket, which starts full (or, with
//     Behavior.CarryTokens, with the fraction the old one held). Identical is Envoy's test,
//     not proto equality: max_tokens, tokens_per_fill and the nanoseconds
//     of fill_interval, so that a change of fill_interval's whole seconds
//     alone keeps the old bucket, and its old rate;
//   - the assignment's TTL is read in whole seconds; on expiry the bucket
//     goes to the expired-assignment fallback if one is configured, and
//     otherwise (or when the fallback's own TTL ends) back to its
//     no-assignment behaviour;
//   - actions for buckets this Envoy never reported are dropped;
//     abandon_action erases the bucket, so its next request is a first one.
//
// The decisions (Quota) are pure functions of the time passed in; Envoy
// (envoy.go) adds the stream and the report timer on the real clock.
package rlqstest

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Behavior is what a bucket does while it has no assignment, or after one
// expired: Strategy nil allows every request (Envoy's default).
type Behavior struct {
	// NoAssignment is the bucket's strategy until the server assigns one
	// (the filter's no_assignment_behavior.fallback_rate_limit).
	NoAssignment *typev3.RateLimitStrategy
	// Expired, when set, replaces an expired assignment for ExpiredTTL
	// (the filter's expired_assignment_behavior); nil goes straight back
	// to NoAssignment.
	Expired    *typev3.RateLimitStrategy
	ExpiredTTL time.Duration
	// CarryTokens starts a token bucket that replaces another with the
	// fraction of its maximum that the old one held, rounded down, as the
	// newest upstream source read does (docs/rlqs.md, "What Envoy does"),
	// rather than full, as the older one does; false is the older, and the
	// worse case for a fleet's overshoot.
	CarryTokens bool
}

// Quota is one simulated Envoy's buckets: what each enforces and what it
// will report. It is not safe for concurrent use (Envoy locks around it).
// The zero value is not usable: call NewQuota.
type Quota struct {
	behavior Behavior
	buckets  map[string]*bucket
	// Dropped counts the actions dropped because their bucket was never
	// reported (or was abandoned since).
	Dropped int
	// Skipped counts the assignments not enforced (requests_per_time_unit
	// or no strategy), which Envoy skips.
	Skipped int
}

// bucket is one bucket id's state.
type bucket struct {
	id              map[string]string
	allowed, denied uint64 // since the last report
	lastReport      time.Time
	strategy        *typev3.RateLimitStrategy // nil: the no-assignment behaviour
	expires         time.Time                 // when strategy stops applying
	fallback        bool                      // strategy is the expired fallback
	tokens          *tokenBucket              // set when strategy is a token bucket
}

// NewQuota returns a Quota with no buckets.
func NewQuota(b Behavior) *Quota {
	return &Quota{behavior: b, buckets: map[string]*bucket{}}
}

// Key is a bucket id's canonical form: its entries sorted by key, each part
// length-prefixed so that no key or value can forge another id.
func Key(id map[string]string) string {
	keys := make([]string, 0, len(id))
	for k := range id {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		for _, s := range []string{k, id[k]} {
			sb.WriteString(strconv.Itoa(len(s)))
			sb.WriteByte(':')
			sb.WriteString(s)
		}
	}
	return sb.String()
}

// Allow decides one request of bucket id at now and counts it. first is
// true when the bucket did not exist: Envoy then reports it at once
// (FirstReport).
func (q *Quota) Allow(id map[string]string, now time.Time) (allowed, first bool) {
	k := Key(id)
	b, ok := q.buckets[k]
	if !ok {
		b = &bucket{id: copyID(id), lastReport: now}
		q.buckets[k] = b
		q.setStrategy(b, q.behavior.NoAssignment, time.Time{}, now)
	}
	q.expire(b, now)
	allowed = b.decide(now)
	if allowed {
		b.allowed++
	} else {
		b.denied++
	}
	return allowed, !ok
}

// FirstReport is the report of bucket id alone that Envoy sends when the
// bucket's first request arrives: time_elapsed 0 s, since none has.
func (q *Quota) FirstReport(domain string, id map[string]string, now time.Time) *rlqspb.RateLimitQuotaUsageReports {
	b := q.buckets[Key(id)]
	if b == nil {
		return nil
	}
	return &rlqspb.RateLimitQuotaUsageReports{
		Domain:            domain,
		BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{b.usage(now)},
	}
}

// Reports is the periodic report of every bucket, which resets their
// counters; nil when there are no buckets.
func (q *Quota) Reports(domain string, now time.Time) *rlqspb.RateLimitQuotaUsageReports {
	if len(q.buckets) == 0 {
		return nil
	}
	keys := make([]string, 0, len(q.buckets))
	for k := range q.buckets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := &rlqspb.RateLimitQuotaUsageReports{Domain: domain}
	for _, k := range keys {
		r.BucketQuotaUsages = append(r.BucketQuotaUsages, q.buckets[k].usage(now))
	}
	return r
}

// usage takes the bucket's counters and the whole seconds since its last
// report, cut down and always set (0 s under one), as Envoy does.
func (b *bucket) usage(now time.Time) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	u := &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		BucketId:           &rlqspb.BucketId{Bucket: copyID(b.id)},
		NumRequestsAllowed: b.allowed,
		NumRequestsDenied:  b.denied,
	}
	u.TimeElapsed = &durationpb.Duration{Seconds: int64(now.Sub(b.lastReport) / time.Second)}
	b.allowed, b.denied, b.lastReport = 0, 0, now
	return u
}

// Apply applies a response's actions at now.
func (q *Quota) Apply(r *rlqspb.RateLimitQuotaResponse, now time.Time) {
	for _, a := range r.GetBucketAction() {
		k := Key(a.GetBucketId().GetBucket())
		b, ok := q.buckets[k]
		if !ok || len(a.GetBucketId().GetBucket()) == 0 {
			q.Dropped++
			continue
		}
		if a.GetAbandonAction() != nil {
			delete(q.buckets, k)
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		s := qa.GetRateLimitStrategy()
		if s.GetTokenBucket() == nil && !isBlanket(s) {
			q.Skipped++
			continue
		}
		ttl := time.Duration(qa.GetAssignmentTimeToLive().GetSeconds()) * time.Second
		b.fallback = false
		q.setStrategy(b, s, now.Add(ttl), now)
	}
}

func isBlanket(s *typev3.RateLimitStrategy) bool {
	_, ok := s.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return ok
}

// setStrategy makes s the bucket's strategy until expires (zero: never),
// keeping its token bucket when s's is identical to the one it has.
func (q *Quota) setStrategy(b *bucket, s *typev3.RateLimitStrategy, expires, now time.Time) {
	tb := s.GetTokenBucket()
	switch {
	case tb == nil:
		b.tokens = nil
	case b.tokens == nil || !sameTokenBucket(tb, b.strategy.GetTokenBucket()):
		old := b.tokens
		b.tokens = newTokenBucket(tb, now)
		if old != nil && q.behavior.CarryTokens && old.max > 0 {
			old.refill(now)
			b.tokens.tokens = math.Floor(b.tokens.max * old.tokens / old.max)
		}
	}
	b.strategy, b.expires = s, expires
}

// sameTokenBucket is Envoy's test of an identical token bucket
// (protoTokenBucketsEq in global_client_impl.cc, as docs/rlqs.md tells):
// the maximum, the tokens per fill and the nanoseconds of the fill
// interval, but not its seconds.
func sameTokenBucket(a, b *typev3.TokenBucket) bool {
	return b != nil && a.GetMaxTokens() == b.GetMaxTokens() &&
		a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().GetNanos() == b.GetFillInterval().GetNanos()
}

// expire moves an expired assignment to the fallback, and an expired
// fallback (or an assignment without one) back to no assignment.
func (q *Quota) expire(b *bucket, now time.Time) {
	for !b.expires.IsZero() && !now.Before(b.expires) {
		at := b.expires
		if !b.fallback && q.behavior.Expired != nil {
			b.fallback = true
			q.setStrategy(b, q.behavior.Expired, at.Add(q.behavior.ExpiredTTL), at)
			continue
		}
		b.fallback = false
		q.setStrategy(b, q.behavior.NoAssignment, time.Time{}, at)
	}
}

// decide is the bucket's strategy applied to one request: nil, a
// requests_per_time_unit no-assignment behaviour or an unknown rule fail
// open.
func (b *bucket) decide(now time.Time) bool {
	switch {
	case b.tokens != nil:
		return b.tokens.take(now)
	case isBlanket(b.strategy):
		return b.strategy.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL
	default:
		return true
	}
}

// Strategy is bucket id's current strategy at now (nil: none, allow all)
// and whether the bucket exists.
func (q *Quota) Strategy(id map[string]string, now time.Time) (*typev3.RateLimitStrategy, bool) {
	b, ok := q.buckets[Key(id)]
	if !ok {
		return nil, false
	}
	q.expire(b, now)
	return b.strategy, true
}

// tokenBucket refills continuously, as Envoy's token bucket does; it
// starts full.
type tokenBucket struct {
	tokens, max float64
	rate        float64 // tokens per second; +Inf when the interval is under 1 s
	last        time.Time
}

func newTokenBucket(tb *typev3.TokenBucket, now time.Time) *tokenBucket {
	max := float64(tb.GetMaxTokens())
	secs := tb.GetFillInterval().GetSeconds()
	rate := math.Inf(1)
	if secs > 0 {
		rate = float64(tb.GetTokensPerFill().GetValue()) / float64(secs)
	}
	return &tokenBucket{tokens: max, max: max, rate: rate, last: now}
}

// refill adds the tokens earned since the last refill.
func (t *tokenBucket) refill(now time.Time) {
	if d := now.Sub(t.last); d > 0 {
		if math.IsInf(t.rate, 1) {
			t.tokens = t.max
		} else {
			t.tokens = math.Min(t.max, t.tokens+t.rate*d.Seconds())
		}
		t.last = now
	}
}

func (t *tokenBucket) take(now time.Time) bool {
	t.refill(now)
	if math.IsInf(t.rate, 1) && t.max >= 1 {
		t.tokens = t.max
	}
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

func copyID(id map[string]string) map[string]string {
	c := make(map[string]string, len(id))
	for k, v := range id {
		c[k] = v
	}
	return c
}
