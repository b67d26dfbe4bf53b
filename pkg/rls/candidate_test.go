package rls

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// candidateLimits has a limit of 10 a minute with a candidate of 5, a
// list whose first limit has one, and a limit without; enforcedLimits is
// the same file without the candidates.
const candidateLimits = `
domain: llm
descriptors:
  - key: tenant
    rate_limit:
      name: api
      algorithm: fixed_window
      unit: minute
      requests_per_unit: 10
      candidate: {algorithm: fixed_window, unit: minute, requests_per_unit: 5}
  - key: pair
    rate_limits:
      - {name: burst, algorithm: token_bucket, unit: second, requests_per_unit: 4, candidate: {algorithm: token_bucket, unit: second, requests_per_unit: 2}}
      - {name: daily, algorithm: fixed_window, unit: day, requests_per_unit: 100}
  - key: plain
    rate_limit: {name: plain, algorithm: fixed_window, unit: minute, requests_per_unit: 3}
`

func enforcedLimits() string {
	var b strings.Builder
	for _, line := range strings.Split(candidateLimits, "\n") {
		if i := strings.Index(line, "candidate: "); i >= 0 {
			line = strings.TrimSuffix(strings.TrimRight(line[:i], " "), ",")
			if strings.HasSuffix(line, "requests_per_unit: 4") {
				line += "}"
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// candidateOptions answer with everything an answer can carry, at the
// store's instant.
func candidateOptions() Options {
	return Options{DynamicMetadata: true, Headers: []HeaderDialect{IETFHeaders, RatelimitHeaders(DefaultRatelimitHeaderNames)},
		Now: func() time.Time { return time.UnixMicro(instant) }}
}

func candidateCounts(t *testing.T, m *metrics.Metrics, want string) {
	t.Helper()
	if want != "" {
		want = "# HELP rls_candidate_decisions_total Hits a rule's candidate limit decided (on counters of its own, never enforced), by domain and rule.\n" +
			"# TYPE rls_candidate_decisions_total counter\n" + want
	}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "rls_candidate_decisions_total", "rls_candidate_would_refuse_total"); err != nil {
		t.Error(err)
	}
}

const refusalsHead = "# HELP rls_candidate_would_refuse_total Hits a rule's candidate limit would have refused had it been enforced, by domain and rule; the answer is the enforced limit's.\n" +
	"# TYPE rls_candidate_would_refuse_total counter\n"

// TestCandidateNeverAnswers: a candidate of 5 a minute beside a limit of
// 10 lets the 10 requests through that the limit does and refuses the
// 11th as it does, each answer (statuses, headers, metadata) the same as
// the file without the candidate gives; 5 of the first 10 are counted as
// would-refuse, and the enforced counter is the one the file without it
// keeps.
func TestCandidateNeverAnswers(t *testing.T) {
	with, m := warnService(t, candidateLimits, candidateOptions())
	without, m0 := warnService(t, enforcedLimits(), candidateOptions())
	ctx := context.Background()
	allowed := 0
	for range 11 {
		req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "t1")}}
		if sameAnswer(t, with, without, req).OverallCode == rlsv3.RateLimitResponse_OK {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d requests allowed, want 10", allowed)
	}
	candidateCounts(t, m, `rls_candidate_decisions_total{domain="llm",rule="api"} 11
`+refusalsHead+`rls_candidate_would_refuse_total{domain="llm",rule="api"} 6
`)
	candidateCounts(t, m0, "")
	for _, svc := range []*Service{with, without} {
		ex, err := svc.Explain(ctx, "llm", []descriptors.Entry{{Key: "tenant", Value: "t1"}})
		if err != nil {
			t.Fatal(err)
		}
		if st := ex.Limits[0].State; st.Remaining != 0 || st.Allowed {
			t.Errorf("enforced state %+v, want 0 remaining and refused", st)
		}
	}
}

// TestCandidateInRequests: in a request of several descriptors, one with
// a list whose first limit has a candidate, every answer is the one
// without candidates; the candidate counts apart from the joint run, and
// a peek counts nothing.
func TestCandidateInRequests(t *testing.T) {
	with, m := warnService(t, candidateLimits, candidateOptions())
	without, _ := warnService(t, enforcedLimits(), candidateOptions())
	for range 6 {
		for _, hits := range []uint32{1, 0} {
			req := &rlsv3.RateLimitRequest{Domain: "llm", HitsAddend: hits,
				Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("pair", "p"), desc("plain", "x"), desc("tenant", "t2")}}
			if hits == 0 {
				// Cost 0 is 1 by Envoy's rule; a peek is asked for by a
				// descriptor's hits_addend of 0.
				for _, d := range req.Descriptors {
					d.HitsAddend = wrapperspb.UInt64(0)
				}
			}
			sameAnswer(t, with, without, req)
		}
	}
	// pair: 4 of 6 allowed, its candidate of 2 would refuse 4; tenant:
	// 6 allowed, its candidate of 5 would refuse 1.
	candidateCounts(t, m, `rls_candidate_decisions_total{domain="llm",rule="api"} 6
rls_candidate_decisions_total{domain="llm",rule="burst"} 6
`+refusalsHead+`rls_candidate_would_refuse_total{domain="llm",rule="api"} 1
rls_candidate_would_refuse_total{domain="llm",rule="burst"} 4
`)
}

// TestExplainCandidate: explain shows each limit's candidate beside it,
// with a key of its own and its state read by the same peek; a limit
// without one shows none, in JSON and in text.
func TestExplainCandidate(t *testing.T) {
	svc, _ := warnService(t, candidateLimits, candidateOptions())
	hitTenant(t, svc, 7)
	ex := explain(t, svc, "llm", "tenant", "t1")
	l := ex.Limits[0]
	c := l.Candidate
	if c == nil || c.State == nil {
		t.Fatalf("candidate %+v, want one with a state", c)
	}
	if c.Key == "" || c.Key == l.Key {
		t.Errorf("candidate key %q, enforced %q: want a key of its own", c.Key, l.Key)
	}
	if l.State.Remaining != 3 || !l.State.Allowed || c.State.Remaining != 0 || c.State.Allowed || c.RequestsPerUnit != 5 {
		t.Errorf("enforced %+v, candidate %+v: want 3 remaining of 10 and 0 of 5", l.State, c.State)
	}
	var b strings.Builder
	if err := ex.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "  [0] api: fixed_window, 10 per minute, failure mode allow (the service's), shadow false (line 6)\n" +
		"      key:   " + l.Key + "\n" +
		"      state: remaining 3 of 10, reset " + l.State.Reset + "; a request of cost 1 would be allowed (the status reports this limit)\n" +
		"      candidate (not enforced): fixed_window, 5 per minute (line 10)\n" +
		"        key:   " + c.Key + "\n" +
		"        state: remaining 0 of 5, reset " + c.State.Reset + "; it would refuse a request\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("text:\n%s\nwant it to hold\n%s", b.String(), want)
	}
	plain := explain(t, svc, "llm", "plain", "x")
	if plain.Limits[0].Candidate != nil {
		t.Errorf("plain: candidate %+v, want none", plain.Limits[0].Candidate)
	}
	js, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "candidate") {
		t.Errorf("plain JSON names a candidate: %s", js)
	}
}

// TestResetCandidate: a reset clears a limit's candidate with it.
func TestResetCandidate(t *testing.T) {
	svc, _ := warnService(t, candidateLimits, candidateOptions())
	hitTenant(t, svc, 7)
	done, err := svc.Reset(context.Background(), "llm", entries("tenant", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Limits) != 1 {
		t.Errorf("reset reports %+v, want the one enforced limit", done.Limits)
	}
	ex := explain(t, svc, "llm", "tenant", "t1")
	if l := ex.Limits[0]; l.State.Remaining != 10 || l.Candidate.State.Remaining != 5 {
		t.Errorf("after reset: enforced %+v, candidate %+v, want both whole", l.State, l.Candidate.State)
	}
}

// hitTenant sends n requests of tenant t1 to svc.
func hitTenant(t *testing.T, svc *Service, n int) {
	t.Helper()
	for range n {
		if _, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "t1")}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCandidateListings: a descriptor listed twice in a request is tried
// as it is decided: together (the native profile: one hit of both costs)
// or apart (envoyproxy/ratelimit's profile: a hit each), the answers those
// of the file without the candidate either way.
func TestCandidateListings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		profile   Profile
		decisions int
	}{
		{"together", NativeProfile, 3},
		{"apart", RatelimitProfile, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := candidateOptions()
			opts.Profile = tc.profile
			with, m := warnService(t, candidateLimits, opts)
			without, _ := warnService(t, enforcedLimits(), opts)
			req := &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "t3"), desc("tenant", "t3")}}
			for range 3 {
				sameAnswer(t, with, without, req)
			}
			// 6 units on a candidate of 5: the last hit would be refused.
			candidateCounts(t, m, fmt.Sprintf(`rls_candidate_decisions_total{domain="llm",rule="api"} %d
`+refusalsHead+`rls_candidate_would_refuse_total{domain="llm",rule="api"} 1
`, tc.decisions))
		})
	}
}

// sameAnswer sends req to with and to without, and fails unless they
// answer alike; it returns the answer.
func sameAnswer(t *testing.T, with, without *Service, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	got, err := with.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := without.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("answer with candidates\n%v\nwant the answer without\n%v", got, want)
	}
	return got
}

// callLog is a store that records each call's hits, then passes the call
// on to the store it wraps.
type callLog struct {
	limits.Store
	mu    sync.Mutex
	calls [][]limits.Hit
}

func (l *callLog) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	l.mu.Lock()
	l.calls = append(l.calls, slices.Clone(hits))
	l.mu.Unlock()
	l.Store.Decide(ctx, hits, results)
}

// TestCandidateHits: a request's candidates go in its one store call,
// after its descriptors' hits, each alone (never joint), on a key of its
// own, at the descriptor's cost and with its hold; a reserve is counted,
// its settle is not.
func TestCandidateHits(t *testing.T) {
	const file = `
domain: llm
holds: {id: request_id, settle: settle, lease: 2m}
descriptors:
  - key: pair
    rate_limits:
      - {name: burst, algorithm: token_bucket, unit: second, requests_per_unit: 4, candidate: {algorithm: token_bucket, unit: second, requests_per_unit: 2}}
      - {name: daily, algorithm: fixed_window, unit: day, requests_per_unit: 100}
`
	d, err := config.Parse("llm.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New(memory.Options{Now: func() int64 { return instant }, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	log, m := &callLog{Store: mem}, metrics.New()
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: log, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][]string{{"pair", "p", "request_id", "r1"}, {"pair", "p", "request_id", "r1", "settle", "true"}} {
		if _, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "llm",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{costly(3, kv...)}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(log.calls) != 2 {
		t.Fatalf("%d store calls for 2 requests, want 2", len(log.calls))
	}
	for i, hits := range log.calls {
		if len(hits) != 3 {
			t.Fatalf("call %d: %d hits, want 3 (the two limits, then the candidate)", i, len(hits))
		}
		c := hits[2]
		want := limits.Hold{ID: "r1", Settle: i == 1, Lease: 2 * time.Minute}
		if !hits[0].Joint || hits[1].Joint || c.Joint || c.Cost != 3 || c.Hold != want || c.Limit.Requests != 2 {
			t.Errorf("call %d: joint %t %t %t, candidate cost %d hold %+v limit %s", i, hits[0].Joint, hits[1].Joint, c.Joint, c.Cost, c.Hold, c.Limit)
		}
		if c.Key == hits[0].Key || c.Key == hits[1].Key || c.Tag != hits[0].Tag {
			t.Errorf("call %d: candidate key %q tag %x beside %q %q tag %x: want a key of its own, the same tag", i, c.Key, c.Tag, hits[0].Key, hits[1].Key, hits[0].Tag)
		}
	}
	// The reserve of 3 is over the candidate's 2: counted as would-refuse.
	candidateCounts(t, m, `rls_candidate_decisions_total{domain="llm",rule="burst"} 1
`+refusalsHead+`rls_candidate_would_refuse_total{domain="llm",rule="burst"} 1
`)
}
