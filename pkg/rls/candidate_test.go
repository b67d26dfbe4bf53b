package rls

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
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
	call := func(svc *Service, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		resp, err := svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "llm", Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	allowed := 0
	for i := 1; i <= 11; i++ {
		got, want := call(with, desc("tenant", "t1")), call(without, desc("tenant", "t1"))
		if !proto.Equal(got, want) {
			t.Fatalf("request %d: answer with a candidate\n%v\nwant the answer without\n%v", i, got, want)
		}
		if got.OverallCode == rlsv3.RateLimitResponse_OK {
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
// a peek or a refund counts nothing.
func TestCandidateInRequests(t *testing.T) {
	with, m := warnService(t, candidateLimits, candidateOptions())
	without, _ := warnService(t, enforcedLimits(), candidateOptions())
	for i := 1; i <= 6; i++ {
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
			got, err := with.ShouldRateLimit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := without.ShouldRateLimit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("request %d (hits %d): answer with candidates\n%v\nwant\n%v", i, hits, got, want)
			}
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
