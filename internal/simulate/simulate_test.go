package simulate

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// t0 is a minute's start, so that fixed windows start with the trace.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// even is n requests of user=alice, one every gap from t0.
func even(n int, gap time.Duration) trace.Trace {
	t := trace.Trace{Start: t0, Sources: []trace.Descriptor{{{Key: "user", Value: "alice"}}}}
	for i := range n {
		t.Requests = append(t.Requests, trace.Request{At: time.Duration(i) * gap})
	}
	return t
}

func load(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Options{}.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFixedWindowCounts: 10 a minute as a fixed window, 30 requests 4 s
// apart (15 in each of two minutes): each minute admits its first 10 and
// refuses the other 5.
func TestFixedWindowCounts(t *testing.T) {
	res, err := Run(load(t, "testdata/fixed10.yaml"), "sim", even(30, 4*time.Second), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 1 || res.Rules[0].Rule != "per-user" {
		t.Fatalf("got rules %+v, want per-user alone", res.Rules)
	}
	s := res.Rules[0]
	if want := []int64{10, 10}; !slices.Equal(s.Admitted, want) {
		t.Errorf("admitted %v, want %v", s.Admitted, want)
	}
	if want := []int64{5, 5}; !slices.Equal(s.Refused, want) {
		t.Errorf("refused %v, want %v", s.Refused, want)
	}
}

// TestLeakyBucketDoesNotWait: a leaky bucket's shaping wait, which the
// server sleeps, is decided and counted without the replay sleeping it:
// 1 a second, 5 requests at once, the first admitted at once and the
// next ones queued up to -max-delay (1 s by default), the rest refused.
func TestLeakyBucketDoesNotWait(t *testing.T) {
	start := time.Now()
	events := even(5, 0)
	res, err := Run(load(t, "testdata/leaky.yaml"), "sim", events, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the replay took %s: it slept the waits", took)
	}
	a, r := res.Rules[0].Total()
	if a+r != 5 || a < 1 || r < 1 {
		t.Errorf("admitted %d, refused %d of 5 at once on 1 a second: want some of each", a, r)
	}
}

// TestRunErrors: a domain the limits lack and an empty trace are
// refused with what is wrong.
func TestRunErrors(t *testing.T) {
	cfg := load(t, "testdata/fixed10.yaml")
	for _, c := range []struct {
		domain string
		trace  trace.Trace
		want   string
	}{
		{"nope", even(1, 0), `domain "nope" is not in the limits (domains: [sim])`},
		{"sim", even(0, 0), "the trace has no requests"},
	} {
		if _, err := Run(cfg, c.domain, c.trace, time.Second); err == nil || err.Error() != c.want {
			t.Errorf("%s, %d requests: got %v, want %q", c.domain, len(c.trace.Requests), err, c.want)
		}
	}
}

// TestRulesLabelled: a request is counted under the limit its status
// reports, as rls_decisions_total counts it: of two limits on one
// descriptor, the refusing one, else the one with the least left; an
// unnamed limit under its config path. Ten requests of alice within a
// second: the 2 that pass leave the second's limit fewer left than the
// minute's, and the second's refuses the other 8; path=/x twice at 1 a
// minute: one of each.
func TestRulesLabelled(t *testing.T) {
	tr := even(10, 100*time.Millisecond)
	tr.Sources = append(tr.Sources, trace.Descriptor{{Key: "path", Value: "/x"}})
	tr.Requests = append(tr.Requests, trace.Request{At: time.Second, Source: 1}, trace.Request{At: time.Second, Source: 1})
	res, err := Run(load(t, "testdata/two.yaml"), "sim", tr, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, s := range res.Rules {
		a, r := s.Total()
		got[s.Rule] = [2]int64{a, r}
	}
	want := map[string][2]int64{"burst": {2, 8}, "path_/x": {1, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v (admitted, refused per rule)", got, want)
	}
}
