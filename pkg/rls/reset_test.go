package rls

import (
	"context"
	"errors"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestResetLetsThrough: a descriptor its limits refuse is allowed again
// after a reset, every limit of a rate_limits list cleared, on the store
// and on the embedded store of failure mode local; a reset of another
// value leaves a refused one refused.
func TestResetLetsThrough(t *testing.T) {
	local := memory.New(memory.Options{SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	f := newFixture(t, nil, Options{Local: local})
	for range 3 {
		f.call(t, desc("pair", "a"))
	}
	for range 4 {
		f.call(t, desc("remote_address", "x"))
	}
	if f.call(t, desc("pair", "a")).OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatal("the fourth request of 3 per hour was allowed")
	}
	pairHits := func(value string) []limits.Hit {
		ix := f.svc.index.Load()
		p := newPlan(ix, "edge", 1)
		defer p.release()
		if err := p.add(f.svc, ix, descriptorInput{entries: entries("pair", value), cost: 1}); err != nil {
			t.Fatal(err)
		}
		p.finish(f.svc, 0)
		return append([]limits.Hit(nil), p.hits...)
	}
	res := make([]limits.Result, 2)
	local.Decide(context.Background(), pairHits("a"), res) // state on the local store too
	done, err := f.svc.Reset(context.Background(), "edge", entries("pair", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if done.Node != "pair" || len(done.Limits) != 2 || done.Limits[0].Name != "per-second" || done.Limits[1].Name != "per-hour" {
		t.Fatalf("got %+v, want both limits of pair", done)
	}
	st := f.call(t, desc("pair", "a")).Statuses[0]
	if st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit.GetName() != "per-second" || st.LimitRemaining != 1 {
		t.Fatalf("after the reset got %v, want allowed as a new key (per-second reported with 1 remaining)", st)
	}
	local.Decide(context.Background(), pairHits("a"), res)
	if !res[1].Allowed || res[1].Remaining != 2 {
		t.Errorf("the local store after the reset: got %+v, want a new key's answer", res[1])
	}
	if _, err := f.svc.Reset(context.Background(), "edge", entries("remote_address", "y")); err != nil {
		t.Fatal(err)
	}
	if st := f.call(t, desc("remote_address", "x")).Statuses[0]; st.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("another value's reset let x through: %v", st)
	}
}

// TestResetNoLimit: a descriptor no limit counts is a *NoLimitError that
// says why, as explain does; a request no call could make is a plain
// error.
func TestResetNoLimit(t *testing.T) {
	f := newFixture(t, nil, Options{})
	for _, c := range []struct {
		domain string
		kv     []string
		reason string
	}{
		{"nowhere", []string{"remote_address", "1"}, "unknown domain"},
		{"edge", []string{"nothing", "1"}, "no node matches entry 1 (nothing=1)"},
		{"edge", []string{"path", "/healthz"}, "unlimited"},
		{"edge", []string{"path", "/login"}, "has none"},
	} {
		_, err := f.svc.Reset(context.Background(), c.domain, entries(c.kv...))
		var nl *NoLimitError
		if !errors.As(err, &nl) || !strings.Contains(nl.Reason, c.reason) {
			t.Errorf("%s %v: got %v, want a NoLimitError saying %q", c.domain, c.kv, err, c.reason)
		}
	}
	_, err := f.svc.Reset(context.Background(), "", entries("a", "b"))
	var nl *NoLimitError
	if err == nil || errors.As(err, &nl) {
		t.Errorf("an empty domain: got %v, want a plain error", err)
	}
}
