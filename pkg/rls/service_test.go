package rls

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

const testLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, unit: minute, requests_per_unit: 3}
  - key: api_key
    rate_limit: {name: per-key, algorithm: token_bucket, unit: second, requests_per_unit: 1, burst: 2}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {name: login, algorithm: fixed_window, unit: hour, requests_per_unit: 2}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadowed, unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {name: soft, unit: hour, requests_per_unit: 1}
  - key: tenant
    value: "t-*"
    share_threshold: true
    rate_limit: {name: tenants, unit: hour, requests_per_unit: 2}
  - key: plan
    value: gold
    rate_limit: {name: gold, unit: hour, requests_per_unit: 100, replaces: [{name: per-ip}]}
  - key: strict
    rate_limit: {name: strict, unit: hour, requests_per_unit: 5, failure_mode: deny}
  - key: windowed
    rate_limit: {name: windowed, unit: second, unit_multiplier: 30, requests_per_unit: 4}
  - key: pair
    rate_limits:
      - {name: per-second, algorithm: token_bucket, unit: second, requests_per_unit: 2}
      - {name: per-hour, algorithm: fixed_window, unit: hour, requests_per_unit: 3}
  - key: shaped
    rate_limit: {name: shaped, algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 2}
  - key: charged
    rate_limit: {name: charged, algorithm: fixed_window, unit: hour, requests_per_unit: 5, count_refused: true}
  - key: logged
    rate_limit: {name: logged, algorithm: sliding_log, unit: minute, requests_per_unit: 2}
`

// instant is a fixed clock: 2023-11-14T22:13:20Z, 20 s into a minute.
const instant int64 = 1_700_000_000_000_000

type fixture struct {
	svc   *Service
	store *memory.Store
	clock atomic.Int64
}

func newFixture(t *testing.T, wrap func(limits.Store) limits.Store, opts Options) *fixture {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(testLimits))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.clock.Store(instant)
	f.store = memory.New(memory.Options{Now: f.clock.Load, SweepInterval: -1})
	t.Cleanup(func() { f.store.Close() })
	opts.Store = f.store
	if wrap != nil {
		opts.Store = wrap(f.store)
	}
	f.svc, err = New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (f *fixture) call(t *testing.T, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.Statuses) != len(ds) {
		t.Fatalf("got %d statuses, want %d", len(resp.Statuses), len(ds))
	}
	return resp
}

type want struct {
	code      rlsv3.RateLimitResponse_Code
	name      string // "" means no current_limit
	remaining uint32
	reset     time.Duration
}

func check(t *testing.T, st *rlsv3.RateLimitResponse_DescriptorStatus, w want) {
	t.Helper()
	if st.Code != w.code {
		t.Errorf("code = %v, want %v", st.Code, w.code)
	}
	if w.name == "" {
		if st.CurrentLimit != nil {
			t.Errorf("current_limit = %v, want none", st.CurrentLimit)
		}
		return
	}
	if st.CurrentLimit.GetName() != w.name {
		t.Errorf("current_limit.name = %q, want %q", st.CurrentLimit.GetName(), w.name)
	}
	if st.LimitRemaining != w.remaining {
		t.Errorf("limit_remaining = %d, want %d", st.LimitRemaining, w.remaining)
	}
	if got := st.DurationUntilReset.AsDuration(); got != w.reset {
		t.Errorf("duration_until_reset = %v, want %v", got, w.reset)
	}
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

func TestCountsAndStatuses(t *testing.T) {
	f := newFixture(t, nil, Options{})
	ip := desc("remote_address", "203.0.113.7")
	// A sliding window of 3 per minute, 20 s into the window: each allowed
	// hit keeps remaining from its maximum until the end of the next window.
	for i := 1; i <= 3; i++ {
		resp := f.call(t, ip)
		check(t, resp.Statuses[0], want{ok, "per-ip", uint32(3 - i), 100 * time.Second})
		if resp.OverallCode != ok {
			t.Fatalf("hit %d: overall %v", i, resp.OverallCode)
		}
	}
	resp := f.call(t, ip)
	if resp.OverallCode != over {
		t.Fatalf("4th hit: overall = %v, want OVER_LIMIT", resp.OverallCode)
	}
	// The count moves to the previous window in 40 s and must decay by one
	// third of a window before one more fits: 60 s in all.
	check(t, resp.Statuses[0], want{over, "per-ip", 0, 60 * time.Second})
	if cl := resp.Statuses[0].CurrentLimit; cl.RequestsPerUnit != 3 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("current_limit = %v, want 3 per MINUTE", cl)
	}
	// Another address has its own counter.
	check(t, f.call(t, desc("remote_address", "198.51.100.1")).Statuses[0], want{ok, "per-ip", 2, 100 * time.Second})
}

func TestSeveralDescriptorsInOrder(t *testing.T) {
	f := newFixture(t, nil, Options{})
	resp := f.call(t,
		desc("path", "/login", "user", "bob"),
		desc("path", "/healthz"),
		desc("nothing", "here"),
		desc("api_key", "k1"),
	)
	check(t, resp.Statuses[0], want{ok, "login", 1, 46*time.Minute + 40*time.Second})
	check(t, resp.Statuses[1], want{code: ok})
	check(t, resp.Statuses[2], want{code: ok})
	check(t, resp.Statuses[3], want{ok, "per-key", 1, time.Second})
	f.call(t, desc("path", "/login", "user", "bob"))
	resp = f.call(t, desc("api_key", "k1"), desc("path", "/login", "user", "bob"))
	if resp.OverallCode != over {
		t.Errorf("overall = %v, want OVER_LIMIT when one descriptor is over", resp.OverallCode)
	}
	check(t, resp.Statuses[0], want{ok, "per-key", 0, 2 * time.Second})
	check(t, resp.Statuses[1], want{over, "login", 0, 46*time.Minute + 40*time.Second})
}

func TestMostSpecificMatch(t *testing.T) {
	f := newFixture(t, nil, Options{})
	// A descriptor deeper than the tree, or stopping above the limit,
	// matches nothing.
	check(t, f.call(t, desc("path", "/login")).Statuses[0], want{code: ok})
	check(t, f.call(t, desc("remote_address", "x", "user", "y")).Statuses[0], want{code: ok})
}

// countingStore counts the hits that reach the store.
type countingStore struct {
	limits.Store
	hits atomic.Int64
}

func (c *countingStore) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	c.hits.Add(int64(len(hits)))
	c.Store.Decide(ctx, hits, results)
}

func TestUnlimitedNeverTouchesTheStore(t *testing.T) {
	var cs *countingStore
	f := newFixture(t, func(s limits.Store) limits.Store { cs = &countingStore{Store: s}; return cs }, Options{})
	for range 10 {
		check(t, f.call(t, desc("path", "/healthz")).Statuses[0], want{code: ok})
	}
	if n := cs.hits.Load(); n != 0 {
		t.Errorf("the store saw %d hits for an unlimited descriptor", n)
	}
}

func TestShadowMode(t *testing.T) {
	f := newFixture(t, nil, Options{})
	f.call(t, desc("shadow", "a"))
	resp := f.call(t, desc("shadow", "a"))
	if resp.OverallCode != ok {
		t.Errorf("overall = %v, want OK for a shadow limit", resp.OverallCode)
	}
	check(t, resp.Statuses[0], want{ok, "shadowed", 0, 2*time.Hour - 20*time.Second - 13*time.Minute})
}

// Quota mode (envoyproxy/ratelimit's rule since quotas came in): a quota
// over keeps its own OVER_LIMIT status, and refuses the request only when
// every quota-mode descriptor of it is over; any other descriptor over
// refuses it as usual.
func TestQuotaMode(t *testing.T) {
	f := newFixture(t, nil, Options{})
	f.call(t, desc("quota", "a")) // soft: 1 an hour, now used up
	resp := f.call(t, desc("remote_address", "x"), desc("quota", "a"), desc("quota", "b"))
	if resp.OverallCode != ok {
		t.Errorf("one of two quotas over: overall %v, want OK", resp.OverallCode)
	}
	if c := resp.Statuses[1].Code; c != over {
		t.Errorf("the quota over: status %v, want OVER_LIMIT", c)
	}
	if c := resp.Statuses[2].Code; c != ok {
		t.Errorf("the quota with room: status %v, want OK", c)
	}
	// Now both are used up: refused.
	if resp := f.call(t, desc("quota", "a"), desc("quota", "b")); resp.OverallCode != over {
		t.Errorf("every quota over: overall %v, want OVER_LIMIT", resp.OverallCode)
	}
	// A descriptor over that is no quota refuses, whatever the quotas say.
	f.call(t, desc("path", "/login", "user", "q"))
	f.call(t, desc("path", "/login", "user", "q"))
	if resp := f.call(t, desc("path", "/login", "user", "q"), desc("quota", "c")); resp.OverallCode != over {
		t.Errorf("a limit over beside a quota with room: overall %v, want OVER_LIMIT", resp.OverallCode)
	}

	// -quota-mode makes every descriptor a quota.
	g := newFixture(t, nil, Options{QuotaMode: true})
	for range 2 {
		g.call(t, desc("path", "/login", "user", "g"))
	}
	resp = g.call(t, desc("path", "/login", "user", "g"), desc("remote_address", "g"))
	if resp.OverallCode != ok || resp.Statuses[0].Code != over {
		t.Errorf("-quota-mode, one of two over: %v", resp)
	}
}

func TestShareThreshold(t *testing.T) {
	f := newFixture(t, nil, Options{})
	f.call(t, desc("tenant", "t-1"))
	f.call(t, desc("tenant", "t-2"))
	if resp := f.call(t, desc("tenant", "t-3")); resp.OverallCode != over {
		t.Errorf("third tenant under one shared wildcard: %v, want OVER_LIMIT", resp.OverallCode)
	}
}

func TestReplaces(t *testing.T) {
	f := newFixture(t, nil, Options{})
	for range 5 {
		resp := f.call(t, desc("remote_address", "x"), desc("plan", "gold"))
		check(t, resp.Statuses[0], want{code: ok})
		if resp.OverallCode != ok {
			t.Fatalf("overall = %v, want OK: per-ip is replaced by gold", resp.OverallCode)
		}
	}
}

func TestHits(t *testing.T) {
	f := newFixture(t, nil, Options{})
	call := func(reqHits uint32, d *ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse_DescriptorStatus {
		t.Helper()
		resp, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: reqHits})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0]
	}
	d := desc("path", "/login", "user", "hits")
	// A peek (descriptor hits 0) consumes nothing.
	peek := desc("path", "/login", "user", "hits")
	peek.HitsAddend = wrapperspb.UInt64(0)
	check(t, call(5, peek), want{ok, "login", 2, 0})
	// The request's hits_addend applies; the descriptor's own wins.
	check(t, call(2, d), want{ok, "login", 0, 46*time.Minute + 40*time.Second})
	check(t, call(2, peek), want{over, "login", 0, 46*time.Minute + 40*time.Second})
	// A refund gives quota back.
	refund := desc("path", "/login", "user", "hits")
	refund.HitsAddend = wrapperspb.UInt64(1)
	refund.IsNegativeHits = true
	check(t, call(0, refund), want{ok, "login", 1, 46*time.Minute + 40*time.Second})
	// A cost above the limit can never fit, and leaves the key untouched.
	// It is told to wait a whole period (the key is full again sooner):
	// never an invitation to retry at once.
	big := desc("path", "/login", "user", "hits")
	big.HitsAddend = wrapperspb.UInt64(1 << 40)
	check(t, call(0, big), want{over, "login", 1, time.Hour})
	check(t, call(0, peek), want{ok, "login", 1, 46*time.Minute + 40*time.Second})
}

func TestLimitOverride(t *testing.T) {
	f := newFixture(t, nil, Options{})
	// An override replaces the rate of a matched rule and keeps its name
	// and algorithm.
	d := desc("remote_address", "o1")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	check(t, f.call(t, d).Statuses[0], want{ok, "per-ip", 0, 2*time.Hour - 13*time.Minute - 20*time.Second})
	resp := f.call(t, d)
	if resp.OverallCode != over {
		t.Errorf("second hit under a 1/hour override: %v", resp.OverallCode)
	}
	if cl := resp.Statuses[0].CurrentLimit; cl.RequestsPerUnit != 1 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR {
		t.Errorf("current_limit = %v, want 1 per HOUR", cl)
	}
	// It applies even where no rule matches, as long as the domain is
	// known, and takes a unit multiplier.
	d = desc("unmatched", "x")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(5)}
	st := f.call(t, d).Statuses[0]
	if st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnitMultiplier().GetValue() != 5 || st.LimitRemaining != 1 {
		t.Errorf("status = %v, want 2 per 5 minutes with 1 remaining", st)
	}
	bad := desc("remote_address", "o2")
	bad.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	_, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{bad}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("override without a unit: %v, want InvalidArgument", err)
	}
}

func TestUnitMultiplierReported(t *testing.T) {
	f := newFixture(t, nil, Options{})
	cl := f.call(t, desc("windowed", "x")).Statuses[0].CurrentLimit
	if cl.RequestsPerUnit != 4 || cl.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.UnitMultiplier.GetValue() != 30 {
		t.Errorf("current_limit = %v, want 4 per 30 SECOND", cl)
	}
}

func TestUnknownDomain(t *testing.T) {
	f := newFixture(t, nil, Options{})
	resp, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "nope", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "x")}})
	if err != nil || resp.OverallCode != ok || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("unknown domain: %v, %v; want OK with no limit", resp, err)
	}
}

func TestInvalidRequests(t *testing.T) {
	f := newFixture(t, nil, Options{})
	many := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors+1)
	for i := range many {
		many[i] = desc("remote_address", "x")
	}
	deep := desc()
	for range MaxEntries + 1 {
		deep.Entries = append(deep.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"empty domain":       {Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "b")}},
		"no descriptors":     {Domain: "edge"},
		"empty descriptor":   {Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc()}},
		"too many":           {Domain: "edge", Descriptors: many},
		"too many entries":   {Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{deep}},
		"nil request fields": {},
	} {
		_, err := f.svc.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", name, err)
		}
	}
}

// failingStore fails every hit.
type failingStore struct{}

func (failingStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	for i := range results {
		results[i] = limits.Result{Err: errors.New("connection refused")}
	}
}

// hangingStore answers only when its context is done, as a store behind a
// dead network does.
type hangingStore struct{}

func (hangingStore) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	<-ctx.Done()
	for i := range results {
		results[i] = limits.Result{Err: ctx.Err()}
	}
}

func TestFailureModes(t *testing.T) {
	fail := func(limits.Store) limits.Store { return failingStore{} }
	t.Run("allow", func(t *testing.T) {
		f := newFixture(t, fail, Options{FailureMode: config.FailAllow})
		resp := f.call(t, desc("remote_address", "x"), desc("strict", "y"))
		check(t, resp.Statuses[0], want{ok, "per-ip", 3, 0})
		// A limit's own failure_mode wins over the flag.
		if resp.Statuses[1].Code != over || resp.OverallCode != over {
			t.Errorf("failure_mode: deny on the limit: %v", resp)
		}
	})
	t.Run("error", func(t *testing.T) {
		f := newFixture(t, fail, Options{FailureMode: config.FailError})
		_, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "x")}})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("failure_mode error: err = %v, want UNAVAILABLE", err)
		}
		// Unlimited and unmatched descriptors need no store: no error.
		f.call(t, desc("path", "/healthz"), desc("nothing", "here"))
	})
	t.Run("local", func(t *testing.T) {
		local := memory.New(memory.Options{SweepInterval: -1})
		t.Cleanup(func() { local.Close() })
		f := newFixture(t, fail, Options{FailureMode: config.FailLocal, Local: local})
		// The embedded store of this instance decides: 3 per minute.
		for i := 0; i < 3; i++ {
			if resp := f.call(t, desc("remote_address", "x")); resp.OverallCode != ok {
				t.Fatalf("hit %d on the local store: %v", i, resp.OverallCode)
			}
		}
		resp := f.call(t, desc("remote_address", "x"))
		if resp.OverallCode != over || resp.Statuses[0].CurrentLimit.GetName() != "per-ip" {
			t.Errorf("4th hit on the local store: %v, want OVER_LIMIT by per-ip", resp)
		}
		// A limit's own deny still wins over the flag's local.
		if resp := f.call(t, desc("strict", "y")); resp.OverallCode != over {
			t.Errorf("failure_mode deny under -failure-mode local: %v", resp.OverallCode)
		}
	})
	t.Run("deny", func(t *testing.T) {
		f := newFixture(t, fail, Options{FailureMode: config.FailDeny})
		resp := f.call(t, desc("remote_address", "x"), desc("path", "/healthz"))
		if resp.Statuses[0].Code != over || resp.Statuses[1].Code != ok || resp.OverallCode != over {
			t.Errorf("deny: %v", resp)
		}
	})
}

func TestStoreTimeoutWithinDeadline(t *testing.T) {
	f := newFixture(t, func(limits.Store) limits.Store { return hangingStore{} }, Options{StoreTimeout: 20 * time.Millisecond})
	start := time.Now()
	resp := f.call(t, desc("remote_address", "x"))
	// A correctness bound with a wide margin: the answer comes by the store
	// timeout, not never.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v with a 20ms store timeout", d)
	}
	if resp.OverallCode != ok {
		t.Errorf("fail open: %v", resp.OverallCode)
	}
	// The request's own deadline, when sooner, wins.
	f = newFixture(t, func(limits.Store) limits.Store { return hangingStore{} }, Options{StoreTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := f.svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "x")}}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %v with a 20ms request deadline", d)
	}
}

func TestSetIndexSwapsConfig(t *testing.T) {
	f := newFixture(t, nil, Options{})
	d, err := config.Parse("new.yaml", []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {name: new, unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f.svc.SetIndex(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{"edge": d}}))
	if name := f.call(t, desc("remote_address", "x")).Statuses[0].CurrentLimit.GetName(); name != "new" {
		t.Errorf("after SetIndex the rule is %q, want new", name)
	}
}

func BenchmarkShouldRateLimit(b *testing.B) {
	d, err := config.Parse("limits.yaml", []byte(testLimits))
	if err != nil {
		b.Fatal(err)
	}
	store := memory.New(memory.Options{})
	defer store.Close()
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: store, StoreInProcess: true})
	if err != nil {
		b.Fatal(err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "bench")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
