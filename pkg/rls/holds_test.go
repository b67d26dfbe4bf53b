package rls

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

const holdsLimits = `
domain: llm
holds: {id: request_id, settle: settle, lease: 2m}
descriptors:
  - key: api_key
    rate_limit: {name: budget, algorithm: fixed_window, unit: hour, requests_per_unit: 100}
  - key: model
    rate_limits:
      - {name: per-minute, algorithm: fixed_window, unit: minute, requests_per_unit: 10}
      - {name: per-day, algorithm: fixed_window, unit: day, requests_per_unit: 1000}
  - key: shaped
    rate_limit: {name: shaped, algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 2}
  - key: fallback
    rate_limit: {name: fallback, algorithm: fixed_window, unit: hour, requests_per_unit: 5, failure_mode: local}
  - key: slots
    rate_limit: {name: slots, algorithm: concurrency, requests_per_unit: 2}
`

const holdsLease = 2 * time.Minute // the file's lease

// hitLog is a store that records the hits it is asked to decide, then
// passes them on to the store it wraps.
type hitLog struct {
	limits.Store
	mu   sync.Mutex
	hits []limits.Hit
}

func (l *hitLog) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	l.mu.Lock()
	l.hits = append(l.hits, hits...)
	l.mu.Unlock()
	l.Store.Decide(ctx, hits, results)
}

// take returns the hits recorded since the last take.
func (l *hitLog) take() []limits.Hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hits
	l.hits = nil
	return h
}

type holdsFixture struct {
	svc     *Service
	log     *hitLog
	metrics *metrics.Metrics
}

// newHoldsFixture serves holdsLimits on the embedded store, behind a
// hitLog; store, when not nil, stands in for the embedded store (which
// then decides only what failure mode local sends it).
func newHoldsFixture(t *testing.T, store limits.Store) *holdsFixture {
	t.Helper()
	d, err := config.Parse("llm.yaml", []byte(holdsLimits))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New(memory.Options{Now: func() int64 { return instant }, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	f := &holdsFixture{log: &hitLog{Store: mem}, metrics: metrics.New()}
	opts := Options{Store: f.log, Metrics: f.metrics, Now: func() time.Time { return time.UnixMicro(instant) }}
	if store != nil {
		opts.Store, opts.Local = store, f.log
	}
	f.svc, err = New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *holdsFixture) call(ds ...*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	return f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: ds})
}

// costly is descriptor kv with hits_addend cost.
func costly(cost uint32, kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := desc(kv...)
	d.HitsAddend = wrapperspb.UInt64(uint64(cost))
	return d
}

// The id and settle entries are not part of the counted key, wherever
// they are in the descriptor: every call of a request counts on
// api_key=t1's counter, and carries what they say in its hit's Hold, the
// lease on every hit of the domain.
func TestHoldsTakeEntriesOut(t *testing.T) {
	f := newHoldsFixture(t, nil)
	for _, tc := range []struct {
		d    *ratelimitv3.RateLimitDescriptor
		want limits.Hold
	}{
		{costly(1, "api_key", "t1"), limits.Hold{Lease: holdsLease}},
		{costly(10, "api_key", "t1", "request_id", "r7"), limits.Hold{ID: "r7", Lease: holdsLease}},
		{costly(7, "request_id", "r7", "api_key", "t1", "settle", "true"), limits.Hold{ID: "r7", Settle: true, Lease: holdsLease}},
		{costly(7, "settle", "", "api_key", "t1"), limits.Hold{Settle: true, Lease: holdsLease}},
		{costly(1, "api_key", "t1", "request_id", "", "request_id", "r8"), limits.Hold{ID: "r8", Lease: holdsLease}},
	} {
		if _, err := f.call(tc.d); err != nil {
			t.Fatal(err)
		}
		hits := f.log.take()
		if len(hits) != 1 {
			t.Fatalf("%v: %d hits, want 1", tc.d.Entries, len(hits))
		}
		key, _ := f.svc.storeKey("llm", entries("api_key", "t1"), hits[0].Limit, 0)
		if hits[0].Key != key || hits[0].Hold != tc.want {
			t.Errorf("%v: key %q hold %+v, want %q %+v", tc.d.Entries, hits[0].Key, hits[0].Hold, key, tc.want)
		}
	}
	// Each hit of a rate_limits list carries the hold.
	if _, err := f.call(costly(3, "model", "m", "request_id", "r9")); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.log.take() {
		if h.Hold.ID != "r9" || h.Hold.Lease != holdsLease {
			t.Errorf("joint hit %s: hold %+v, want id r9", h.Key, h.Hold)
		}
	}
	// A descriptor of nothing but the holds' entries walks nothing: no
	// limit, no store call.
	resp, err := f.call(desc("request_id", "r1", "settle", "1"))
	if err != nil || resp.OverallCode != ok || len(f.log.take()) != 0 {
		t.Errorf("holds' entries alone: %v, %v; want OK without a store call", resp, err)
	}
}

// An id longer than limits.MaxHoldID refuses the request, before the
// store; a settle without an id is a plain charge. Both are counted.
func TestHoldsBadInput(t *testing.T) {
	f := newHoldsFixture(t, nil)
	long := strings.Repeat("x", limits.MaxHoldID+1)
	_, err := f.call(desc("api_key", "t1"), desc("api_key", "t1", "request_id", long))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "descriptor 1: hold id of 257 bytes") {
		t.Errorf("long id: got %v, want InvalidArgument naming descriptor 1", err)
	}
	if hits := f.log.take(); len(hits) != 0 {
		t.Errorf("long id: %d hits decided, want none", len(hits))
	}
	if _, err := f.call(desc("api_key", "t1", "request_id", long[1:])); err != nil {
		t.Errorf("id of MaxHoldID bytes: %v", err)
	}
	if _, err := f.call(costly(3, "api_key", "t1", "settle", "true")); err != nil {
		t.Fatal(err)
	}
	for outcome, want := range map[string]float64{metrics.HoldInvalid: 1, metrics.HoldSettleWithoutID: 1} {
		if got := holdsCount(t, f.metrics, "llm", outcome); got != want {
			t.Errorf("rls_holds_total{outcome=%q}: got %v, want %v", outcome, got, want)
		}
	}
}

// holdsCount reads rls_holds_total{domain, outcome}.
func holdsCount(t *testing.T, m *metrics.Metrics, domain, outcome string) float64 {
	t.Helper()
	return counted(t, m, "rls_holds_total", map[string]string{"domain": domain, "outcome": outcome})
}

// Two descriptors of one request on the same counters are decided as one
// only when their holds are the same: two requests' reserves, or a
// reserve and a settle, each keep their own.
func TestHoldsSameCounters(t *testing.T) {
	f := newHoldsFixture(t, nil)
	for _, tc := range []struct {
		name  string
		ds    []*ratelimitv3.RateLimitDescriptor
		costs []int64
	}{
		{"same id", []*ratelimitv3.RateLimitDescriptor{costly(2, "api_key", "t1", "request_id", "a"), costly(3, "api_key", "t1", "request_id", "a")}, []int64{5}},
		{"two ids", []*ratelimitv3.RateLimitDescriptor{costly(2, "api_key", "t1", "request_id", "a"), costly(3, "api_key", "t1", "request_id", "b")}, []int64{2, 3}},
		{"reserve and settle", []*ratelimitv3.RateLimitDescriptor{costly(2, "api_key", "t1", "request_id", "a"), costly(3, "api_key", "t1", "request_id", "a", "settle", "1")}, []int64{2, 3}},
		{"an id and none", []*ratelimitv3.RateLimitDescriptor{costly(2, "api_key", "t1"), costly(3, "api_key", "t1", "request_id", "a")}, []int64{2, 3}},
	} {
		resp, err := f.call(tc.ds...)
		if err != nil {
			t.Fatal(err)
		}
		var costs []int64
		for _, h := range f.log.take() {
			costs = append(costs, h.Cost)
		}
		if len(resp.Statuses) != len(tc.ds) || !equalInts(costs, tc.costs) {
			t.Errorf("%s: %d statuses, hits of costs %v; want %d, %v", tc.name, len(resp.Statuses), costs, len(tc.ds), tc.costs)
		}
	}
}

// budgetKey is api_key=t1's key of limit l.
func budgetKey(f *holdsFixture, l limits.Limit) string {
	key, _ := f.svc.storeKey("llm", entries("api_key", "t1"), l, 0)
	return key
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Failure mode local decides the descriptor again on the embedded store
// with the same hits: their holds go along.
func TestHoldsFailureLocal(t *testing.T) {
	f := newHoldsFixture(t, failingStore{})
	resp, err := f.call(costly(2, "fallback", "x", "request_id", "r1"))
	if err != nil || resp.OverallCode != ok {
		t.Fatalf("got %v, %v; want OK from the embedded store", resp, err)
	}
	hits := f.log.take()
	if len(hits) != 1 || hits[0].Hold != (limits.Hold{ID: "r1", Lease: holdsLease}) {
		t.Errorf("embedded store's hits: %+v, want one with hold r1", hits)
	}
}

// A leaky bucket delays an allowed hit to its turn, but never a settle:
// nobody waits for the answer to Envoy's stream-done call.
func TestHoldsSettleNeverWaits(t *testing.T) {
	f := newHoldsFixture(t, nil)
	delay := func(kv ...string) int64 {
		t.Helper()
		p, err := f.svc.planRequest(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(kv...)}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.release()
		f.svc.callStore(context.Background(), time.Now(), p.hits, p.results)
		p.settle(f.svc)
		if !p.descs[0].verdict.allowed {
			t.Fatalf("%v: refused", kv)
		}
		return int64(p.descs[0].verdict.delay)
	}
	delay("shaped", "s")
	if d := delay("shaped", "s", "request_id", "r1"); d == 0 {
		t.Fatalf("second hit of the bucket: no delay; the test needs one")
	}
	if d := delay("shaped", "s", "request_id", "r1", "settle", "1"); d != 0 {
		t.Errorf("settle: delay %d, want 0", d)
	}
}

// Explain walks the entries less the holds', marks those, and says what
// the descriptor does with its hold, as JSON and as text.
func TestExplainHolds(t *testing.T) {
	f := newHoldsFixture(t, nil)
	ex := explain(t, f.svc, "llm", "api_key", "t1", "request_id", "r7", "settle", "true")
	if got := matches(ex); got != "bare:api_key" || len(ex.Limits) != 1 {
		t.Errorf("walk %q, %d limits; want bare:api_key and budget", got, len(ex.Limits))
	}
	marks := []string{}
	for _, e := range ex.Entries {
		marks = append(marks, e.Key+":"+e.Hold)
	}
	if got := strings.Join(marks, " "); got != "api_key: request_id:id settle:settle" {
		t.Errorf("entries %s, want the id and settle marked", got)
	}
	want := ExplainedHold{IDKey: "request_id", SettleKey: "settle", Lease: "2m0s", ID: "r7", Settle: true, Does: HoldSettle}
	if ex.Hold == nil || *ex.Hold != want {
		t.Errorf("hold %+v, want %+v", ex.Hold, want)
	}
	if key := f.svc.Index().Config().Domains["llm"].Descriptors[0].Rules[0].Limit; ex.Limits[0].Key != budgetKey(f, key) {
		t.Errorf("key %q, want api_key=t1's %q", ex.Limits[0].Key, budgetKey(f, key))
	}
	var b strings.Builder
	if err := ex.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"descriptor: api_key=t1, request_id=r7 (hold id), settle=true (hold settle)\n",
		"hold:       settle: ends id \"r7\"'s hold and charges this call's cost in its place (a plain charge when none is held); never delayed (holds: id request_id, settle settle, lease 2m0s; their entries are not walked)\n",
		"  1. api_key=t1: bare key api_key",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}
	for kv, does := range map[[4]string]string{
		{"api_key", "t1", "request_id", "r7"}: HoldReserve,
		{"api_key", "t1", "settle", "x"}:      HoldSettleWithoutID,
		{"api_key", "t1", "model", "m"}:       HoldNone,
	} {
		if ex := explain(t, f.svc, "llm", kv[:]...); ex.Hold == nil || ex.Hold.Does != does {
			t.Errorf("%v: hold %+v, want %s", kv, ex.Hold, does)
		}
	}
	if ex := explain(t, f.svc, "llm", "request_id", "r7"); !strings.Contains(ex.Outcome, "only the entries of the domain's holds") {
		t.Errorf("holds' entries alone: outcome %q", ex.Outcome)
	}
	if _, err := f.svc.Explain(context.Background(), "llm", entries("api_key", "t1", "request_id", strings.Repeat("x", limits.MaxHoldID+1))); err == nil {
		t.Error("long id: Explain has no error, want ShouldRateLimit's")
	}
	if hits := f.log.take(); len(hits) == 0 || hits[0].Hold.ID != "" {
		t.Errorf("Explain's peeks: %+v, want hits without an id (a peek holds nothing)", hits)
	}
}

// Without hold entries a holds domain's decision allocates what any
// decision does.
func TestHoldsDecisionAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	f := newHoldsFixture(t, nil)
	f.svc.metrics = nil
	req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "bench")}}
	var ctx context.Context = soonCtx{context.Background()}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := f.svc.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("%.1f allocations per decision, want at most 6 (key + 5 protobuf)", allocs)
	}
}
