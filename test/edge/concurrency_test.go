package edge

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// perRouteDescriptors builds the descriptors of a RateLimitPerRoute's
// rate_limits for r: those sent on the request (done false), or those sent
// when the stream ends (done true, apply_on_stream_done), as Envoy's
// RateLimitConfig::populateDescriptors picks them.
func perRouteDescriptors(t *testing.T, rls []*routev3.RateLimit, r request, done bool) [][]descriptors.Entry {
	t.Helper()
	var out [][]descriptors.Entry
	for _, rl := range rls {
		if rl.GetApplyOnStreamDone() != done {
			continue
		}
		if d, ok := populate(t, rl, r); ok {
			out = append(out, d)
		}
	}
	return out
}

// streamDone is what the filter sends for r when its stream ends: the
// descriptors of the route's RateLimitPerRoute entries with
// apply_on_stream_done, each with its hits_addend (number, and
// is_negative_hits), as the filter's onDestroy sends them.
func streamDone(t *testing.T, e *edge, r request) *rlsv3.RateLimitRequest {
	t.Helper()
	rt := routeFor(t, e.vhost, r)
	req := &rlsv3.RateLimitRequest{Domain: e.filter.GetDomain()}
	a := rt.GetTypedPerFilterConfig()[rateLimitFilter]
	if a == nil {
		return req
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := m.(*ratelimitfilterv3.RateLimitPerRoute)
	if !ok {
		return req
	}
	for _, rl := range pr.GetRateLimits() {
		if !rl.GetApplyOnStreamDone() {
			continue
		}
		d, ok := populate(t, rl, r)
		if !ok {
			continue
		}
		rd := &ratelimitv3.RateLimitDescriptor{IsNegativeHits: rl.GetHitsAddend().GetIsNegativeHits()}
		if n := rl.GetHitsAddend().GetNumber(); n != nil {
			rd.HitsAddend = wrapperspb.UInt64(n.GetValue())
		}
		for _, en := range d {
			rd.Entries = append(rd.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: en.Key, Value: en.Value})
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	return req
}

// TestReportsInFlight is config/envoy.yaml's /api/reports route against
// config/limits.yaml over gRPC: ten requests of one API key in flight are
// allowed, the eleventh is refused, and its own end (the stream-done call,
// a negative hit, which Envoy sends for refused requests too) frees no
// slot of the ten; once one of the ten ends the next is allowed; another
// key has its own ten slots.
func TestReportsInFlight(t *testing.T) {
	e := loadEdge(t)
	s := startServer(t)
	r := request{"GET", "/api/reports/monthly", map[string]string{"x-api-key": "k1"}, clientV4}
	ds := envoyDescriptors(t, e, r)
	done := streamDone(t, e, r)
	if len(done.GetDescriptors()) != 1 || !done.GetDescriptors()[0].GetIsNegativeHits() {
		t.Fatalf("stream done sends %v, want one negative hit", done.GetDescriptors())
	}
	code := func(resp *rlsv3.RateLimitResponse) rlsv3.RateLimitResponse_Code { return resp.GetOverallCode() }
	for i := 1; i <= 10; i++ {
		if got := code(s.ask(t, e, ds)); got != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d in flight: %v, want OK", i, got)
		}
	}
	resp := s.ask(t, e, ds)
	if code(resp) != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("an eleventh in flight: %v, want OVER_LIMIT", code(resp))
	}
	last := resp.GetStatuses()[len(resp.GetStatuses())-1]
	if last.GetCurrentLimit().GetName() != "reports-in-flight" || last.GetLimitRemaining() != 0 {
		t.Errorf("the refusal reports %v, want reports-in-flight with 0 remaining", last)
	}
	ctx := t.Context()
	// The refused request ends: its release gives back the slot its
	// refusal holds (count_refused), not one of the ten in flight.
	if _, err := s.client.ShouldRateLimit(ctx, done); err != nil {
		t.Fatalf("stream done: %v", err)
	}
	if got := code(s.ask(t, e, ds)); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after the refused request ended: %v, want OVER_LIMIT (ten still in flight)", got)
	}
	// That one is refused too and ends; then one of the ten ends.
	for range 2 {
		if _, err := s.client.ShouldRateLimit(ctx, done); err != nil {
			t.Fatalf("stream done: %v", err)
		}
	}
	if got := code(s.ask(t, e, ds)); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after one request ended: %v, want OK", got)
	}
	other := request{"GET", "/api/reports", map[string]string{"x-api-key": "k2"}, clientV4}
	if got := code(s.ask(t, e, envoyDescriptors(t, e, other))); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("another key: %v, want OK", got)
	}
}
