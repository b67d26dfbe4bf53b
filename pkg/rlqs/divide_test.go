package rlqs

import (
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func newService(t testing.TB, opts Options) *Service {
	t.Helper()
	ix := testIndex(t)
	svc, err := New(func() *descriptors.Index { return ix }, opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// One Envoy alone gets the whole limit, from its first report (time_elapsed
// 0, an unknown demand) on, as a whole-second token bucket with a TTL over
// two report intervals.
func TestOneEnvoyGetsTheWholeLimit(t *testing.T) {
	svc := newService(t, Options{ReportInterval: time.Second})
	e := dial(t, serve(t, svc))
	for i, u := range []usage{{bucket: api(), allowed: 1}, {bucket: api(), allowed: 30, elapsed: time.Second}} {
		a := e.report(u)[0]
		tb := tokens(t, a)
		if got := perSecond(tb); got != 100 {
			t.Errorf("report %d: %v per second, want 100", i, got)
		}
		if f := tb.GetFillInterval(); f.GetSeconds() < 1 || int64(f.GetNanos()) != f.GetSeconds() {
			t.Errorf("report %d: fill interval %v is not whole seconds repeated in nanoseconds", i, f)
		}
		if ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl <= 2*time.Second || ttl%time.Second != 0 {
			t.Errorf("report %d: TTL %v, want whole seconds over two intervals", i, ttl)
		}
		if a.GetBucketId().GetBucket()["path"] != "/api" {
			t.Errorf("report %d: action for bucket %v", i, a.GetBucketId())
		}
	}
}

// Three Envoys of unequal demand: the small one gets what it asks, the two
// large ones split the rest; when one leaves, its share goes to the others
// at their next report.
func TestMaxMinFairAndLeave(t *testing.T) {
	svc := newService(t, Options{ReportInterval: time.Second})
	conn := serve(t, svc)
	small, big1, big2 := dial(t, conn), dial(t, conn), dial(t, conn)
	demand := map[*envoy]uint64{small: 10, big1: 200, big2: 200}
	var got map[*envoy]float64
	for round := 0; round < 3; round++ {
		got = map[*envoy]float64{}
		for _, e := range []*envoy{small, big1, big2} {
			got[e] = perSecond(tokens(t, e.report(usage{bucket: api(), allowed: demand[e], elapsed: time.Second})[0]))
		}
	}
	if got[small] != 10 || math.Abs(got[big1]-45) > 1 || math.Abs(got[big2]-45) > 1 {
		t.Fatalf("shares small %v, big %v and %v; want 10, 45, 45", got[small], got[big1], got[big2])
	}
	if sum := got[small] + got[big1] + got[big2]; sum > 100 {
		t.Fatalf("shares sum to %v, over the limit 100", sum)
	}
	totals := 0
	svc.rules.each(func(rule string, assigned, limit float64) {
		totals++
		if rule != "edge.path_/api" || assigned > 100 || assigned < 99 || limit != 100 {
			t.Errorf("rule %q: assigned %v of %v, want 99 to 100 of 100", rule, assigned, limit)
		}
	})
	if totals != 1 {
		t.Errorf("%d rules with totals, want 1", totals)
	}
	big2.leave()
	waitFor(t, func() bool { return svc.Stats().Streams.Load() == 2 })
	s := perSecond(tokens(t, small.report(usage{bucket: api(), allowed: 10, elapsed: time.Second})[0]))
	b := perSecond(tokens(t, big1.report(usage{bucket: api(), allowed: 200, elapsed: time.Second})[0]))
	if s < 10 || math.Abs(b-90) > 1 {
		t.Fatalf("after a leave: small %v, big %v; want 10 and 90", s, b)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The blanket rules: no matching limit, unlimited, zero requests, shadow
// mode; and a nested bare key divided per value.
func TestBlanketRules(t *testing.T) {
	svc := newService(t, Options{ReportInterval: time.Second})
	e := dial(t, serve(t, svc))
	cases := []struct {
		bucket map[string]string
		want   typepb.RateLimitStrategy_BlanketRule
		ttl    time.Duration
	}{
		{map[string]string{"path": "/nowhere"}, typepb.RateLimitStrategy_ALLOW_ALL, time.Hour},
		{map[string]string{"path": "/api", "extra": "x"}, typepb.RateLimitStrategy_ALLOW_ALL, time.Hour},
		{map[string]string{"path": "/login"}, typepb.RateLimitStrategy_ALLOW_ALL, time.Hour},
		{map[string]string{"path": "/free"}, typepb.RateLimitStrategy_ALLOW_ALL, 3 * time.Second},
		{map[string]string{"path": "/closed"}, typepb.RateLimitStrategy_DENY_ALL, 3 * time.Second},
		{map[string]string{"path": "/shadow"}, typepb.RateLimitStrategy_ALLOW_ALL, 3 * time.Second},
	}
	for _, c := range cases {
		a := e.report(usage{bucket: c.bucket, allowed: 1})[0]
		st := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
		if st.GetTokenBucket() != nil || st.GetBlanketRule() != c.want {
			t.Errorf("%v: got %v, want %v", c.bucket, st, c.want)
		}
		if ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != c.ttl {
			t.Errorf("%v: TTL %v, want %v", c.bucket, ttl, c.ttl)
		}
	}
	shadow := 0.0
	svc.rules.each(func(rule string, assigned, _ float64) {
		if rule == "edge.path_/shadow" {
			shadow = assigned
		}
	})
	if shadow != 5 {
		t.Errorf("shadow mode: %v per second would have been assigned, want 5", shadow)
	}
	if n := svc.Stats().NoMatch.Load(); n != 3 {
		t.Errorf("%d buckets counted as matching no limit, want 3", n)
	}
	// 60 a minute is one a second; each user's bucket is its own counter,
	// so two users on one Envoy both get the whole limit.
	for _, user := range []string{"ann", "bob"} {
		tb := tokens(t, e.report(usage{bucket: map[string]string{"user": user, "path": "/login"}})[0])
		if got := perSecond(tb); got != 1 {
			t.Errorf("user %s: %v per second, want 1", user, got)
		}
	}
}

// A bucket that reports no requests for IdleAfter is abandoned, and its
// share is given back.
func TestIdleBucketAbandoned(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	svc := newService(t, Options{ReportInterval: time.Second, IdleAfter: 10 * time.Second, Now: clk.Now})
	e := dial(t, serve(t, svc))
	e.report(usage{bucket: api(), allowed: 5, elapsed: time.Second})
	for i := 0; i < 9; i++ {
		clk.Add(time.Second)
		if a := e.report(usage{bucket: api(), elapsed: time.Second})[0]; a.GetAbandonAction() != nil {
			t.Fatalf("abandoned after %d idle seconds", i+1)
		}
	}
	clk.Add(time.Second)
	if a := e.report(usage{bucket: api(), elapsed: time.Second})[0]; a.GetAbandonAction() == nil {
		t.Fatalf("got %v after 10 idle seconds, want abandon_action", a)
	}
	if n := svc.Stats().Buckets.Load(); n != 0 {
		t.Fatalf("%d buckets left, want 0", n)
	}
	if svc.local.holds(bucketKeyOf(t, svc, "/api")) {
		t.Fatal("the abandoned bucket's demand is still held")
	}
}

// A report whose counts would wrap past 2^64−1 is the largest demand, not
// none: beside an Envoy asking 50 of 100 a second it gets an equal share
// (wrapped to zero it got a quarter, the surplus of a client asking
// nothing), and its bucket is not idle.
func TestAbsurdCountsSaturate(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	svc := newService(t, Options{ReportInterval: time.Second, IdleAfter: 3 * time.Second, Now: clk.Now})
	conn := serve(t, svc)
	absurd, fair := dial(t, conn), dial(t, conn)
	var got float64
	for i := 0; i < 5; i++ {
		fair.report(usage{bucket: api(), allowed: 50, elapsed: time.Second})
		a := absurd.report(usage{bucket: api(), allowed: math.MaxUint64, denied: 1, elapsed: time.Second})[0]
		if a.GetAbandonAction() != nil {
			t.Fatalf("report %d: abandoned, as if it had reported no requests", i)
		}
		got = perSecond(tokens(t, a))
		clk.Add(time.Second)
	}
	if math.Abs(got-50) > 1 {
		t.Fatalf("2^64−1 allowed and 1 denied beside 50 of 100: %v a second, want 50", got)
	}
}

// An Envoy that reports no requests beside one at the limit keeps a token
// bucket of at least one token (its part of the floor), so that its first
// requests when traffic returns are not all refused until its next
// report; the busy one keeps at least 80 % of the limit.
func TestIdleEnvoyKeepsAFloor(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	svc := newService(t, Options{ReportInterval: time.Second, Now: clk.Now})
	conn := serve(t, svc)
	busy, idle := dial(t, conn), dial(t, conn)
	// Both join first (a first report's demand is unknown: equal shares),
	// so that the busy one's share moves past the band when the idle one
	// reports its nothing.
	busy.report(usage{bucket: api(), allowed: 1})
	idle.report(usage{bucket: api(), allowed: 1})
	busy.report(usage{bucket: api(), allowed: 1})
	idle.report(usage{bucket: api(), elapsed: time.Second})
	for i := 0; i < 3; i++ {
		clk.Add(time.Second) // each report reads the division afresh
		b := tokens(t, busy.report(usage{bucket: api(), allowed: 100, elapsed: time.Second})[0])
		a := idle.report(usage{bucket: api(), elapsed: time.Second})[0]
		tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		if tb == nil || tb.GetMaxTokens() < 1 || tb.GetTokensPerFill().GetValue() < 1 {
			t.Fatalf("report %d: the idle Envoy got %v, want a token bucket of at least one token", i, a)
		}
		if got := perSecond(b); got < 80 || got > 100 {
			t.Fatalf("report %d: the busy Envoy got %v a second of 100, want 80 to 100", i, got)
		}
		if sum := perSecond(b) + perSecond(tb); sum > 100 {
			t.Fatalf("report %d: %v a second assigned (%v + %v), over the limit 100", i, sum, perSecond(b), perSecond(tb))
		}
	}
}

// Drain ends the open streams with UNAVAILABLE.
func TestDrain(t *testing.T) {
	svc := newService(t, Options{ReportInterval: time.Second})
	e := dial(t, serve(t, svc))
	e.report(usage{bucket: api(), allowed: 1})
	svc.Drain()
	_, err := e.stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("after Drain: %v, want UNAVAILABLE", err)
	}
	waitFor(t, func() bool { return svc.Stats().Streams.Load() == 0 && svc.Stats().Buckets.Load() == 0 })
}

func TestCollector(t *testing.T) {
	svc := newService(t, Options{ReportInterval: time.Second})
	e := dial(t, serve(t, svc))
	e.report(usage{bucket: api(), allowed: 1}, usage{bucket: map[string]string{"path": "/x"}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(svc.Collector())
	want := `
# HELP rls_rlqs_assignments_total Bucket actions sent, by strategy: token_bucket, allow_all, deny_all, abandon.
# TYPE rls_rlqs_assignments_total counter
rls_rlqs_assignments_total{strategy="abandon"} 0
rls_rlqs_assignments_total{strategy="allow_all"} 1
rls_rlqs_assignments_total{strategy="deny_all"} 0
rls_rlqs_assignments_total{strategy="token_bucket"} 1
# HELP rls_rlqs_assigned_per_second Requests per second this instance's Envoys were last assigned, by rule (domain and place in the tree), summed over their buckets: sum it over instances.
# TYPE rls_rlqs_assigned_per_second gauge
rls_rlqs_assigned_per_second{rule="edge.path_/api"} 100
# HELP rls_rlqs_buckets Buckets the open RLQS streams have reported and not abandoned.
# TYPE rls_rlqs_buckets gauge
rls_rlqs_buckets 1
# HELP rls_rlqs_limit_per_second The limits, in requests per second, of the buckets this instance's Envoys hold, by rule, summed over the buckets: beside the assigned sum.
# TYPE rls_rlqs_limit_per_second gauge
rls_rlqs_limit_per_second{rule="edge.path_/api"} 100
# HELP rls_rlqs_no_match_total Buckets reported that no limit matched, answered ALLOW_ALL.
# TYPE rls_rlqs_no_match_total counter
rls_rlqs_no_match_total 1
# HELP rls_rlqs_streams RLQS streams open now: one per Envoy and domain.
# TYPE rls_rlqs_streams gauge
rls_rlqs_streams 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rls_rlqs_assignments_total", "rls_rlqs_assigned_per_second", "rls_rlqs_limit_per_second", "rls_rlqs_buckets", "rls_rlqs_no_match_total", "rls_rlqs_streams"); err != nil {
		t.Fatal(err)
	}
}

func bucketKeyOf(t *testing.T, svc *Service, path string) string {
	t.Helper()
	end, _, p, o := svc.index().MatchSet("edge", []descriptors.Entry{{Key: "path", Value: path}}, nil, nil)
	if end == nil {
		t.Fatalf("%s matches nothing", path)
	}
	return bucketKey("edge", end, p, o)
}

// A reload reaches the next report: the index is read at each one.
func TestReloadReachesTheNextReport(t *testing.T) {
	var ix atomic.Pointer[descriptors.Index]
	ix.Store(testIndex(t))
	svc, err := New(ix.Load, Options{ReportInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := dial(t, serve(t, svc))
	if got := perSecond(tokens(t, e.report(usage{bucket: api(), allowed: 1})[0])); got != 100 {
		t.Fatalf("before the reload: %v per second, want 100", got)
	}
	d, err := config.Parse("limits.yaml", []byte("domain: edge\ndescriptors:\n  - key: path\n    value: /api\n    rate_limit: {unit: second, requests_per_unit: 20}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ix.Store(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
	if got := perSecond(tokens(t, e.report(usage{bucket: api(), allowed: 50, elapsed: time.Second})[0])); got != 20 {
		t.Fatalf("after the reload: %v per second, want 20", got)
	}
}

// Every two shares whose buckets enforce different rates are sent as token
// buckets that differ in what each Envoy version compares: max_tokens,
// tokens_per_fill and the fill interval's nanoseconds (some versions look
// at no more), so that Envoy never keeps a bucket whose rate has changed;
// and Envoy's fill, at the interval's whole seconds, is the bucket's.
func TestChangedBucketsDifferWhereEnvoyLooks(t *testing.T) {
	type compared struct {
		max, perFill uint32
		nanos        int32
	}
	rateOf := map[compared]float64{}
	for i := 1; i <= 20000; i++ {
		v := float64(i) / 200 // 0.005 to 100 a second
		tb, ok := share.DefaultShape.Tokens(v)
		if !ok {
			t.Fatalf("share %v: no bucket", v)
		}
		f := fillInterval(tb.FillInterval)
		if f.GetSeconds() != int64(tb.FillInterval/time.Second) {
			t.Fatalf("share %v: fill interval %v sent for %v", v, f, tb.FillInterval)
		}
		rate := float64(tb.TokensPerFill) / float64(f.GetSeconds())
		k := compared{tb.MaxTokens, tb.TokensPerFill, f.GetNanos()}
		if old, dup := rateOf[k]; dup && old != rate {
			t.Fatalf("share %v: bucket %+v looks to Envoy like the one enforcing %v a second, but enforces %v", v, k, old, rate)
		}
		rateOf[k] = rate
	}
}
