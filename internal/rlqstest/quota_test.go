package rlqstest

import (
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var (
	t0 = time.Unix(1_700_000_000, 0)
	id = map[string]string{"name": "api", "path": "/x"}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

func bucketOf(max, perFill uint32, interval time.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: max, TokensPerFill: wrapperspb.UInt32(perFill), FillInterval: durationpb.New(interval),
	}}}
}

func assign(bid map[string]string, s *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse {
	return &rlqspb.RateLimitQuotaResponse{BucketAction: []*rlqspb.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqspb.BucketId{Bucket: bid},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: s,
			}},
	}}}
}

// count runs n requests at instant now and returns how many were allowed.
func count(q *Quota, n int, now time.Time) int {
	got := 0
	for range n {
		if ok, _ := q.Allow(id, now); ok {
			got++
		}
	}
	return got
}

func TestFirstRequestReportsAtOnceWithZeroElapsed(t *testing.T) {
	q := NewQuota(Behavior{})
	ok, first := q.Allow(id, t0)
	if !ok || !first {
		t.Fatalf("first request: allowed %v first %v, want true true", ok, first)
	}
	r := q.FirstReport("edge", id, t0)
	u := r.GetBucketQuotaUsages()
	if r.GetDomain() != "edge" || len(u) != 1 || u[0].GetNumRequestsAllowed() != 1 || u[0].GetTimeElapsed() == nil || u[0].GetTimeElapsed().AsDuration() != 0 {
		t.Fatalf("first report %v, want domain edge, one bucket, 1 allowed, time_elapsed 0 s", r)
	}
	if _, first := q.Allow(id, at(time.Second)); first {
		t.Fatalf("second request reported as first")
	}
}

func TestReportsCutElapsedToWholeSeconds(t *testing.T) {
	q := NewQuota(Behavior{NoAssignment: blanket(typev3.RateLimitStrategy_DENY_ALL)})
	q.Allow(id, t0)
	q.FirstReport("d", id, t0)
	count(q, 3, at(time.Second))
	u := q.Reports("d", at(2900*time.Millisecond)).GetBucketQuotaUsages()[0]
	if u.GetTimeElapsed().GetSeconds() != 2 || u.GetNumRequestsDenied() != 3 || u.GetNumRequestsAllowed() != 0 {
		t.Fatalf("report %v, want 2 s elapsed, 3 denied (the no-assignment DENY_ALL)", u)
	}
	u = q.Reports("d", at(3500*time.Millisecond)).GetBucketQuotaUsages()[0]
	if u.GetTimeElapsed() == nil || u.GetTimeElapsed().AsDuration() != 0 || u.GetNumRequestsDenied() != 0 {
		t.Fatalf("report after 0.6 s %v, want counters reset and time_elapsed 0 s", u)
	}
}

func TestTokenBucketRefillsContinuously(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, bucketOf(4, 2, time.Second), time.Minute), t0)
	if got := count(q, 10, t0); got != 4 {
		t.Fatalf("full bucket allowed %d of 10, want 4 (max_tokens)", got)
	}
	if got := count(q, 10, at(1500*time.Millisecond)); got != 3 {
		t.Fatalf("after 1.5 s at 2/s allowed %d, want 3", got)
	}
}

func TestFillIntervalCutToWholeSeconds(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, bucketOf(10, 10, 1900*time.Millisecond), time.Minute), t0)
	count(q, 10, t0)
	if got := count(q, 20, at(time.Second)); got != 10 {
		t.Fatalf("1.9 s interval read as 1 s: allowed %d after 1 s, want 10", got)
	}
	// Below one second Envoy's interval is zero and its rate infinite:
	// the bucket never runs dry.
	q.Apply(assign(id, bucketOf(2, 1, 500*time.Millisecond), time.Minute), at(time.Second))
	if got := count(q, 50, at(time.Second)); got != 50 {
		t.Fatalf("sub-second interval allowed %d of 50, want all", got)
	}
}

func TestIdenticalBucketKeepsTokensDifferentStartsFull(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, bucketOf(5, 1, 10*time.Second), time.Minute), t0)
	count(q, 5, t0)
	q.Apply(assign(id, bucketOf(5, 1, 10*time.Second), time.Minute), at(time.Second))
	if got := count(q, 5, at(time.Second)); got != 0 {
		t.Fatalf("identical strategy refilled the bucket: allowed %d, want 0", got)
	}
	q.Apply(assign(id, bucketOf(6, 1, 10*time.Second), time.Minute), at(time.Second))
	if got := count(q, 10, at(time.Second)); got != 6 {
		t.Fatalf("different strategy: allowed %d, want 6 (a new full bucket)", got)
	}
}

// With CarryTokens a replaced bucket starts with the fraction of its
// maximum the old one held: an Envoy that spent its bucket gets no burst
// from a new assignment.
func TestCarryTokens(t *testing.T) {
	q := NewQuota(Behavior{CarryTokens: true})
	q.Allow(id, t0)
	q.Apply(assign(id, bucketOf(10, 1, 10*time.Second), time.Minute), t0)
	count(q, 5, t0) // half left
	q.Apply(assign(id, bucketOf(20, 1, 10*time.Second), time.Minute), t0)
	if got := count(q, 20, t0); got != 10 {
		t.Fatalf("a replaced bucket allowed %d at once, want 10 (half of 20)", got)
	}
	q.Apply(assign(id, bucketOf(30, 1, 10*time.Second), time.Minute), t0)
	if got := count(q, 1, t0); got != 0 {
		t.Fatalf("replacing an empty bucket allowed %d, want 0", got)
	}
}

// Envoy's test of an identical bucket reads fill_interval's nanoseconds
// only: a bucket that differs from the one in force by its whole seconds
// alone is kept, tokens and old rate with it.
func TestFillIntervalSecondsAloneKeepsTheOldBucket(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, bucketOf(1, 1, time.Second), time.Minute), t0)
	count(q, 1, t0)
	q.Apply(assign(id, bucketOf(1, 1, 10*time.Second), time.Minute), t0)
	if got := count(q, 1, t0); got != 0 {
		t.Fatalf("a bucket differing in whole seconds alone was replaced (started full): allowed %d, want 0", got)
	}
	if got := count(q, 1, at(time.Second)); got != 1 {
		t.Fatalf("after 1 s allowed %d, want 1: the old bucket refills at its old rate, 1 a second", got)
	}
}

func TestTTLInWholeSecondsThenNoAssignment(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, blanket(typev3.RateLimitStrategy_DENY_ALL), 2900*time.Millisecond), t0)
	if got := count(q, 1, at(1999*time.Millisecond)); got != 0 {
		t.Fatalf("before the TTL: allowed %d, want 0", got)
	}
	if got := count(q, 1, at(2*time.Second)); got != 1 {
		t.Fatalf("TTL 2.9 s read as 2 s: at 2 s allowed %d, want 1 (no assignment: allow all)", got)
	}
	// An unset TTL reads as 0 s: the assignment is gone at once.
	r := assign(id, blanket(typev3.RateLimitStrategy_DENY_ALL), 0)
	r.BucketAction[0].GetQuotaAssignmentAction().AssignmentTimeToLive = nil
	q.Apply(r, at(3*time.Second))
	if got := count(q, 1, at(3*time.Second)); got != 1 {
		t.Fatalf("unset TTL: allowed %d, want 1", got)
	}
}

func TestExpiredFallbackThenNoAssignment(t *testing.T) {
	q := NewQuota(Behavior{
		NoAssignment: blanket(typev3.RateLimitStrategy_ALLOW_ALL),
		Expired:      blanket(typev3.RateLimitStrategy_DENY_ALL), ExpiredTTL: 10 * time.Second,
	})
	q.Allow(id, t0)
	q.Apply(assign(id, blanket(typev3.RateLimitStrategy_ALLOW_ALL), time.Second), t0)
	if got := count(q, 1, at(5*time.Second)); got != 0 {
		t.Fatalf("in the fallback: allowed %d, want 0", got)
	}
	if got := count(q, 1, at(11*time.Second)); got != 1 {
		t.Fatalf("after the fallback's TTL: allowed %d, want 1", got)
	}
}

func TestRequestsPerTimeUnitSkipped(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Allow(id, t0)
	q.Apply(assign(id, blanket(typev3.RateLimitStrategy_DENY_ALL), time.Minute), t0)
	rptu := &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
		RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: 1}}}
	q.Apply(assign(id, rptu, time.Minute), t0)
	if got := count(q, 1, t0); got != 0 || q.Skipped != 1 {
		t.Fatalf("allowed %d skipped %d, want 0 1 (the DENY_ALL kept)", got, q.Skipped)
	}
	// As the no-assignment behaviour it fails open.
	open := NewQuota(Behavior{NoAssignment: rptu})
	if got := count(open, 5, t0); got != 5 {
		t.Fatalf("requests_per_time_unit as no-assignment: allowed %d of 5, want 5", got)
	}
}

func TestUnreportedDroppedAbandonErases(t *testing.T) {
	q := NewQuota(Behavior{})
	q.Apply(assign(id, blanket(typev3.RateLimitStrategy_DENY_ALL), time.Minute), t0)
	if _, ok := q.Strategy(id, t0); ok || q.Dropped != 1 {
		t.Fatalf("action for an unreported bucket: bucket exists %v dropped %d, want false 1", ok, q.Dropped)
	}
	q.Allow(id, t0)
	q.Apply(&rlqspb.RateLimitQuotaResponse{BucketAction: []*rlqspb.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqspb.BucketId{Bucket: id},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}}}, t0)
	if _, ok := q.Strategy(id, t0); ok {
		t.Fatalf("abandoned bucket still exists")
	}
	if _, first := q.Allow(id, at(time.Second)); !first {
		t.Fatalf("request after abandon not a first request")
	}
}

func TestKeyCannotBeForged(t *testing.T) {
	a := Key(map[string]string{"a": "b:1:c"})
	b := Key(map[string]string{"a": "b", "c": ""})
	if a == b {
		t.Fatalf("two ids share key %q", a)
	}
}
