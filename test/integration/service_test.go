package integration

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	year = 365 * 24 * time.Hour

	unitHour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	unitYear   = rlsv3.RateLimitResponse_RateLimit_YEAR
	unitMinute = rlsv3.RateLimitResponse_RateLimit_MINUTE
)

// serviceLimits is the config of TestService. Every subtest uses keys or
// values of its own, so that they can share one process per store and run in
// parallel. Windows are a year long (epoch-aligned: the next boundary is
// months away) and buckets refill one token in minutes, so that counts and
// resets do not depend on how fast the machine is.
const serviceLimits = `
domain: it
descriptors:
  # Exact counts, one limit per algorithm.
  - key: count
    value: fixed
    rate_limit:
      name: count-fixed
      algorithm: fixed_window
      unit: year
      requests_per_unit: 3
  - key: count
    value: sliding
    rate_limit:
      name: count-sliding
      unit: year
      requests_per_unit: 3
  - key: count
    value: token
    rate_limit:
      name: count-token
      algorithm: token_bucket
      unit: hour
      requests_per_unit: 3

  # Matching: exact value, then wildcards in config order, then the bare key.
  - key: m
    rate_limit:
      name: m-bare
      unit: year
      requests_per_unit: 13
  - key: m
    value: wild*
    rate_limit:
      name: m-wild
      unit: year
      requests_per_unit: 12
  - key: m
    value: exact
    rate_limit:
      name: m-exact
      unit: year
      requests_per_unit: 11
  - key: m2
    value: a*c
    rate_limit:
      name: m2-mid
      unit: year
      requests_per_unit: 14
  - key: nest
    value: a
    descriptors:
      - key: sub
        value: x
        rate_limit:
          name: nest-x
          unit: year
          requests_per_unit: 21
      - key: sub
        value: x*
        rate_limit:
          name: nest-xwild
          unit: year
          requests_per_unit: 22
      - key: sub
        rate_limit:
          name: nest-bare
          unit: year
          requests_per_unit: 23
        descriptors:
          - key: leaf
            rate_limit:
              name: nest-leaf
              unit: year
              requests_per_unit: 24
  - key: above
    value: a
    descriptors:
      - key: below
        rate_limit:
          name: above-below
          unit: year
          requests_per_unit: 31

  # Several descriptors in one request.
  - key: multi
    value: one
    rate_limit:
      name: multi-one
      unit: year
      requests_per_unit: 1
  - key: multi
    value: five
    rate_limit:
      name: multi-five
      unit: year
      requests_per_unit: 5

  # Hits.
  - key: hits
    rate_limit:
      name: hits
      unit: year
      requests_per_unit: 10

  # Envoy's limit override takes the algorithm of the matched rule.
  - key: ovr
    value: tb
    rate_limit:
      name: ovr-tb
      algorithm: token_bucket
      unit: hour
      requests_per_unit: 100

  # A more specific limit replaces a general one of the same request.
  - key: rep
    value: general
    rate_limit:
      name: rep-general
      unit: year
      requests_per_unit: 40
  - key: rep
    value: specific
    rate_limit:
      name: rep-specific
      unit: year
      requests_per_unit: 41
      replaces:
        - name: rep-general

  - key: shadow
    shadow_mode: true
    rate_limit:
      name: shadow
      unit: year
      requests_per_unit: 1

  - key: json
    rate_limit:
      name: json
      unit: year
      requests_per_unit: 1

  - key: free
    rate_limit:
      unlimited: true
`

// serviceLimitCount is the number of limits in serviceLimits: the lines of
// /rlconfig.
const serviceLimitCount = 21

// TestService runs the decisions of docs/semantics.md against a real process per
// store: one process serves all the subtests.
func TestService(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) {
		s := startServer(t, writeConfig(t, serviceLimits), st.flags(t)...)
		for _, tc := range []struct {
			name string
			f    func(t *testing.T, s *server, st store)
		}{
			{"ExactCounts", testExactCounts},
			{"Matching", testMatching},
			{"SeveralDescriptors", testSeveralDescriptors},
			{"Hits", testHits},
			{"LimitOverride", testLimitOverride},
			{"Replaces", testReplaces},
			{"ShadowMode", testShadowMode},
			{"Unlimited", testUnlimited},
			{"UnknownDomain", testUnknownDomain},
			{"BadRequests", testBadRequests},
			{"HTTP", testHTTP},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.f(t, s, st)
			})
		}
	})
}

// testExactCounts: N allowed, then OVER_LIMIT; refused hits do not count.
func testExactCounts(t *testing.T, s *server, _ store) {
	t.Run("fixed_window", func(t *testing.T) {
		lim := limit("count-fixed", 3, unitYear)
		untilEnd := func(e time.Duration) time.Duration { return year - e }
		for i, rem := range []uint32{2, 1, 0} {
			before := time.Now()
			resp := s.decide(t, request("it", desc("count", "fixed")))
			checkResponse(t, resp, codeOK, want{codeOK, lim, rem})
			checkWindowReset(t, "hit "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, year, before, untilEnd)
		}
		for i := range 2 {
			before := time.Now()
			resp := s.decide(t, request("it", desc("count", "fixed")))
			checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
			checkWindowReset(t, "refused hit "+strconv.Itoa(i+4), resp.Statuses[0].DurationUntilReset, year, before, untilEnd)
		}
	})

	t.Run("sliding_window", func(t *testing.T) {
		lim := limit("count-sliding", 3, unitYear)
		for i, rem := range []uint32{2, 1, 0} {
			before := time.Now()
			resp := s.decide(t, request("it", desc("count", "sliding")))
			checkResponse(t, resp, codeOK, want{codeOK, lim, rem})
			// Back at the maximum once the current window has become the
			// previous one and has decayed: 2T - e.
			checkWindowReset(t, "hit "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, year, before,
				func(e time.Duration) time.Duration { return 2*year - e })
		}
		for i := range 2 {
			before := time.Now()
			resp := s.decide(t, request("it", desc("count", "sliding")))
			checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
			// Next window, once 3 × (1 − e'/T) + 1 ≤ 3, e' = T/3.
			checkWindowReset(t, "refused hit "+strconv.Itoa(i+4), resp.Statuses[0].DurationUntilReset, year, before,
				func(e time.Duration) time.Duration { return year - e + year/3 })
		}
	})

	t.Run("token_bucket", func(t *testing.T) {
		// 3 per hour: one token every 20 minutes.
		lim := limit("count-token", 3, unitHour)
		start := time.Now()
		for i, rem := range []uint32{2, 1, 0} {
			resp := s.decide(t, request("it", desc("count", "token")))
			checkResponse(t, resp, codeOK, want{codeOK, lim, rem})
			checkReset(t, "hit "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, time.Duration(i+1)*20*time.Minute, start)
		}
		for i := range 2 {
			resp := s.decide(t, request("it", desc("count", "token")))
			checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
			checkReset(t, "refused hit "+strconv.Itoa(i+4), resp.Statuses[0].DurationUntilReset, 20*time.Minute, start)
		}
	})
}

// testMatching: the most specific rule wins at each level, and a limit
// applies only where the walk ends on the last entry.
func testMatching(t *testing.T, s *server, _ store) {
	for _, tc := range []struct {
		name    string
		entries []string
		limit   *rlsv3.RateLimitResponse_RateLimit // nil: no match
	}{
		{"exact beats wildcard and bare", []string{"m", "exact"}, limit("m-exact", 11, unitYear)},
		{"wildcard beats bare", []string{"m", "wildcard"}, limit("m-wild", 12, unitYear)},
		{"wildcard star matches empty", []string{"m", "wild"}, limit("m-wild", 12, unitYear)},
		{"bare key", []string{"m", "other"}, limit("m-bare", 13, unitYear)},
		{"wildcard in the middle", []string{"m2", "abbc"}, limit("m2-mid", 14, unitYear)},
		{"wildcard in the middle, no match", []string{"m2", "abd"}, nil},
		{"nested exact", []string{"nest", "a", "sub", "x"}, limit("nest-x", 21, unitYear)},
		{"nested wildcard", []string{"nest", "a", "sub", "xy"}, limit("nest-xwild", 22, unitYear)},
		{"nested bare", []string{"nest", "a", "sub", "q"}, limit("nest-bare", 23, unitYear)},
		{"below a bare key", []string{"nest", "a", "sub", "q", "leaf", "z"}, limit("nest-leaf", 24, unitYear)},
		{"exact match without the deeper level", []string{"nest", "a", "sub", "x", "leaf", "z"}, nil},
		{"walk ends above the limit", []string{"nest", "a"}, nil},
		{"walk deeper than the tree", []string{"nest", "a", "sub", "q", "leaf", "z", "extra", "1"}, nil},
		{"unknown value at the first level", []string{"nest", "b", "sub", "x"}, nil},
		{"level without a limit, then a limit", []string{"above", "a", "below", "v"}, limit("above-below", 31, unitYear)},
		{"level without a limit", []string{"above", "a"}, nil},
		{"nested key at the top", []string{"sub", "x"}, nil},
		{"unknown key", []string{"nokey", "x"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.decide(t, request("it", desc(tc.entries...)))
			w := want{code: codeOK}
			if tc.limit != nil {
				w = want{codeOK, tc.limit, tc.limit.RequestsPerUnit - 1}
			}
			checkResponse(t, resp, codeOK, w)
		})
	}
}

// testSeveralDescriptors: one status per descriptor, in order; each decided
// on its own; OVER_LIMIT overall when any is over.
func testSeveralDescriptors(t *testing.T, s *server, _ store) {
	req := request("it", desc("multi", "five"), desc("multi", "one"), desc("nokey", "z"))
	one, five := limit("multi-one", 1, unitYear), limit("multi-five", 5, unitYear)

	resp := s.decide(t, req)
	checkResponse(t, resp, codeOK, want{codeOK, five, 4}, want{codeOK, one, 0}, want{code: codeOK})

	resp = s.decide(t, req)
	checkResponse(t, resp, codeOver, want{codeOK, five, 3}, want{codeOver, one, 0}, want{code: codeOK})

	// The order of the statuses is the order of the request.
	resp = s.decide(t, request("it", desc("nokey", "z"), desc("multi", "one"), desc("multi", "five")))
	checkResponse(t, resp, codeOver, want{code: codeOK}, want{codeOver, one, 0}, want{codeOK, five, 2})
}

// testHits: hits_addend of the request, of the descriptor, and 0 as a peek.
func testHits(t *testing.T, s *server, _ store) {
	lim := limit("hits", 10, unitYear)
	t.Run("request hits_addend", func(t *testing.T) {
		for _, step := range []struct {
			hits uint32
			w    want
		}{
			{4, want{codeOK, lim, 6}},
			{4, want{codeOK, lim, 2}},
			{4, want{codeOver, lim, 2}}, // refused: nothing consumed
			{2, want{codeOK, lim, 0}},
			{0, want{codeOver, lim, 0}}, // 0 means 1
		} {
			req := request("it", desc("hits", "req"))
			req.HitsAddend = step.hits
			resp := s.decide(t, req)
			checkResponse(t, resp, step.w.code, step.w)
			if step.w.code == codeOver && step.w.remaining > 0 {
				awaitUndo(t, s, "it", step.w.remaining, "hits", "req")
			}
		}
	})
	t.Run("descriptor hits_addend overrides", func(t *testing.T) {
		req := request("it", withHits(desc("hits", "desc"), 2))
		req.HitsAddend = 5
		checkResponse(t, s.decide(t, req), codeOK, want{codeOK, lim, 8})
		req = request("it", withHits(desc("hits", "desc"), 3), desc("hits", "desc2"))
		req.HitsAddend = 5
		checkResponse(t, s.decide(t, req), codeOK, want{codeOK, lim, 5}, want{codeOK, lim, 5})
	})
	t.Run("descriptor hits_addend 0 peeks", func(t *testing.T) {
		peek := func() *rlsv3.RateLimitRequest { return request("it", withHits(desc("hits", "peek"), 0)) }
		checkResponse(t, s.decide(t, peek()), codeOK, want{codeOK, lim, 10})
		checkResponse(t, s.decide(t, peek()), codeOK, want{codeOK, lim, 10})
		checkResponse(t, s.decide(t, request("it", desc("hits", "peek"))), codeOK, want{codeOK, lim, 9})
		checkResponse(t, s.decide(t, peek()), codeOK, want{codeOK, lim, 9})
		checkResponse(t, s.decide(t, request("it", withHits(desc("hits", "peek"), 9))), codeOK, want{codeOK, lim, 0})
		// A peek is allowed only if a hit of 1 would be.
		checkResponse(t, s.decide(t, peek()), codeOver, want{codeOver, lim, 0})
	})
	t.Run("negative hits refund", func(t *testing.T) {
		refund := func(n uint64) *rlsv3.RateLimitRequest {
			d := withHits(desc("hits", "refund"), n)
			d.IsNegativeHits = true
			return request("it", d)
		}
		checkResponse(t, s.decide(t, request("it", withHits(desc("hits", "refund"), 7))), codeOK, want{codeOK, lim, 3})
		checkResponse(t, s.decide(t, refund(2)), codeOK, want{codeOK, lim, 5})
		// Never above the maximum.
		checkResponse(t, s.decide(t, refund(20)), codeOK, want{codeOK, lim, 10})
		checkResponse(t, s.decide(t, request("it", desc("hits", "refund"))), codeOK, want{codeOK, lim, 9})
	})
	t.Run("never fits", func(t *testing.T) {
		// More than N can never be allowed, and leaves the key untouched.
		checkResponse(t, s.decide(t, request("it", withHits(desc("hits", "huge"), 11))), codeOver, want{codeOver, lim, 10})
		checkResponse(t, s.decide(t, request("it", withHits(desc("hits", "huge"), 10))), codeOK, want{codeOK, lim, 0})
	})
}

// testLimitOverride: Envoy's descriptor limit replaces the rule's rate and
// period, keeps its name and algorithm, and applies without a rule too.
func testLimitOverride(t *testing.T, s *server, _ store) {
	t.Run("matched rule", func(t *testing.T) {
		d := func() *ratelimitv3.RateLimitDescriptor {
			d := desc("ovr", "tb")
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
			return d
		}
		lim := limit("ovr-tb", 2, unitHour)
		// A token bucket of 2 per hour (the rule's algorithm): a token every
		// 30 minutes.
		start := time.Now()
		resp := s.decide(t, request("it", d()))
		checkResponse(t, resp, codeOK, want{codeOK, lim, 1})
		checkReset(t, "hit 1", resp.Statuses[0].DurationUntilReset, 30*time.Minute, start)
		resp = s.decide(t, request("it", d()))
		checkResponse(t, resp, codeOK, want{codeOK, lim, 0})
		checkReset(t, "hit 2", resp.Statuses[0].DurationUntilReset, time.Hour, start)
		resp = s.decide(t, request("it", d()))
		checkResponse(t, resp, codeOver, want{codeOver, lim, 0})
		checkReset(t, "refused hit 3", resp.Statuses[0].DurationUntilReset, 30*time.Minute, start)
	})
	t.Run("no rule, unit_multiplier", func(t *testing.T) {
		d := func() *ratelimitv3.RateLimitDescriptor {
			d := desc("ovr-none", "x")
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{
				RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(30),
			}
			return d
		}
		lim := limit("", 3, unitMinute)
		lim.UnitMultiplier = wrapperspb.UInt32(30)
		const period = 30 * time.Minute
		for i, rem := range []uint32{2, 1, 0} {
			before := time.Now()
			resp := s.decide(t, request("it", d()))
			checkResponse(t, resp, codeOK, want{codeOK, lim, rem})
			// The default algorithm, a sliding window of 30 minutes.
			checkWindowReset(t, "hit "+strconv.Itoa(i+1), resp.Statuses[0].DurationUntilReset, period, before,
				func(e time.Duration) time.Duration { return 2*period - e })
		}
		checkResponse(t, s.decide(t, request("it", d())), codeOver, want{codeOver, lim, 0})
	})
}

// testReplaces: a matched rule that another matched rule of the same
// request replaces does not apply, and is not charged.
func testReplaces(t *testing.T, s *server, _ store) {
	general, specific := limit("rep-general", 40, unitYear), limit("rep-specific", 41, unitYear)
	checkResponse(t, s.decide(t, request("it", desc("rep", "general"))), codeOK, want{codeOK, general, 39})
	checkResponse(t, s.decide(t, request("it", desc("rep", "general"), desc("rep", "specific"))),
		codeOK, want{code: codeOK}, want{codeOK, specific, 40})
	checkResponse(t, s.decide(t, request("it", desc("rep", "general"))), codeOK, want{codeOK, general, 38})
}

// testShadowMode: over the limit, but the code stays OK; the metrics count
// it as over.
func testShadowMode(t *testing.T, s *server, _ store) {
	lim := limit("shadow", 1, unitYear)
	checkResponse(t, s.decide(t, request("it", desc("shadow", "a"))), codeOK, want{codeOK, lim, 0})
	for range 2 {
		checkResponse(t, s.decide(t, request("it", desc("shadow", "a"))), codeOK, want{codeOK, lim, 0})
	}
	series := `rls_decisions_total{domain="it",outcome="shadow_over_limit",rule="shadow"}`
	if got, ok := s.metric(t, series); !ok || got != 2 {
		t.Errorf("%s: got %v (present %t), want 2", series, got, ok)
	}
}

// testUnlimited: an unlimited rule is OK with no current_limit, and all
// the field holds remaining, as envoyproxy/ratelimit reports it.
func testUnlimited(t *testing.T, s *server, _ store) {
	for range 3 {
		checkResponse(t, s.decide(t, request("it", desc("free", "a"))), codeOK, want{code: codeOK, remaining: math.MaxUint32})
	}
}

// testUnknownDomain: OK, no current_limit, even with a limit override.
func testUnknownDomain(t *testing.T, s *server, _ store) {
	d := desc("count", "fixed")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	for range 3 {
		resp := s.decide(t, request("nope", d, desc("m", "exact")))
		checkResponse(t, resp, codeOK, want{code: codeOK}, want{code: codeOK})
	}
}

// testBadRequests: what no config can answer is InvalidArgument.
func testBadRequests(t *testing.T, s *server, _ store) {
	badUnit := desc("count", "x")
	badUnit.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_UNKNOWN}
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"empty domain", request("", desc("m", "exact"))},
		{"no descriptors", request("it")},
		{"descriptor without entries", request("it", desc("m", "exact"), desc())},
		{"override with unit UNKNOWN", request("it", badUnit)},
		{"too many descriptors", request("it", manyDescriptors(1000)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.shouldRateLimit(tc.req)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Errorf("ShouldRateLimit: got code %v (response %v, error %v), want %v", got, resp, err, codes.InvalidArgument)
			}
		})
	}
}

// testHTTP: /json, health, /metrics and /rlconfig.
func testHTTP(t *testing.T, s *server, st store) {
	t.Run("json", func(t *testing.T) {
		body := `{"domain": "it", "descriptors": [{"entries": [{"key": "json", "value": "a"}]}]}`
		lim := limit("json", 1, unitYear)
		for _, step := range []struct {
			status int
			code   rlsv3.RateLimitResponse_Code
		}{{http.StatusOK, codeOK}, {http.StatusTooManyRequests, codeOver}} {
			code, out := s.post(t, "/json", body)
			if code != step.status {
				t.Errorf("POST /json: got status %d, want %d; body: %s", code, step.status, out)
			}
			var resp rlsv3.RateLimitResponse
			if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
				t.Fatalf("POST /json: body is not a RateLimitResponse in protobuf JSON: %v; body: %s", err, out)
			}
			checkResponse(t, &resp, step.code, want{step.code, lim, 0})
		}
	})
	t.Run("json bad body", func(t *testing.T) {
		for _, body := range []string{
			``,
			`{`,
			`not json`,
			`{"domain": 5}`,
			`{"domain": "it", "unknown_field": 1}`,
			`{"domain": "it", "descriptors": []}`,
			`{"domain": "", "descriptors": [{"entries": [{"key": "json", "value": "b"}]}]}`,
		} {
			if code, out := s.post(t, "/json", body); code != http.StatusBadRequest {
				t.Errorf("POST /json %q: got status %d, want 400; body: %s", body, code, out)
			}
		}
	})
	t.Run("health", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/healthcheck"} {
			code, body := s.get(t, path)
			if code != http.StatusOK || !strings.Contains(body, st.health) {
				t.Errorf("GET %s: got %d %q, want 200 with %q", path, code, body, st.health)
			}
		}
	})
	t.Run("metrics", func(t *testing.T) {
		// The decision of this request makes sure the counter has a series.
		s.decide(t, request("it", desc("json", "metrics")))
		code, body := s.get(t, "/metrics")
		if code != http.StatusOK || !strings.Contains(body, "\nrls_decisions_total{") {
			t.Errorf("GET /metrics: got status %d, want 200 with rls_decisions_total series; body:\n%s", code, body)
		}
		series := `rls_decisions_total{domain="it",outcome="ok",rule="json"}`
		if got, ok := metricValue(body, series); !ok || got < 1 {
			t.Errorf("%s: got %v (present %t), want ≥ 1", series, got, ok)
		}
	})
	t.Run("rlconfig", func(t *testing.T) {
		code, body := s.get(t, "/rlconfig")
		if code != http.StatusOK {
			t.Fatalf("GET /rlconfig: got status %d, want 200; body:\n%s", code, body)
		}
		lines := strings.Split(strings.TrimSpace(body), "\n")
		if len(lines) != serviceLimitCount {
			t.Errorf("GET /rlconfig: got %d lines, want one per limit, %d; body:\n%s", len(lines), serviceLimitCount, body)
		}
		for _, line := range []string{
			"it.count_fixed: fixed_window 3/8760h0m0s name=count-fixed shadow_mode=false",
			"it.count_sliding: sliding_window 3/8760h0m0s name=count-sliding shadow_mode=false",
			"it.count_token: token_bucket 3/1h0m0s burst=3 name=count-token shadow_mode=false",
			"it.nest_a.sub.leaf: sliding_window 24/8760h0m0s name=nest-leaf shadow_mode=false",
			"it.m_wild*: sliding_window 12/8760h0m0s name=m-wild shadow_mode=false",
			"it.shadow: sliding_window 1/8760h0m0s name=shadow shadow_mode=true",
			"it.free: unlimited shadow_mode=false",
			"it.rep_specific: sliding_window 41/8760h0m0s name=rep-specific shadow_mode=false replaces=rep-general",
		} {
			if !containsLine(lines, line) {
				t.Errorf("GET /rlconfig: no line %q; body:\n%s", line, body)
			}
		}
	})
}

func containsLine(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}

func manyDescriptors(n int) []*ratelimitv3.RateLimitDescriptor {
	ds := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range ds {
		ds[i] = desc("nokey", strconv.Itoa(i))
	}
	return ds
}
