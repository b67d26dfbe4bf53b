package rls

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func entries(kv ...string) []descriptors.Entry {
	var es []descriptors.Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, descriptors.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return es
}

func explain(t *testing.T, s *Service, domain string, kv ...string) Explanation {
	t.Helper()
	ex, err := s.Explain(context.Background(), domain, entries(kv...))
	if err != nil {
		t.Fatalf("Explain(%s, %v): %v", domain, kv, err)
	}
	return ex
}

// matches renders the walk as `match:node` per level.
func matches(ex Explanation) string {
	var parts []string
	for _, lv := range ex.Levels {
		parts = append(parts, lv.Match+":"+lv.Node)
	}
	return strings.Join(parts, " ")
}

func TestExplainWalk(t *testing.T) {
	f := newFixture(t, nil, Options{})
	for _, tc := range []struct {
		kv      []string
		walk    string
		node    string
		limits  int
		outcome string
	}{
		{[]string{"remote_address", "1.2.3.4"}, "bare:remote_address", "remote_address", 1, "would be allowed"},
		{[]string{"path", "/login", "user", "alice"}, "exact:path_/login bare:path_/login.user", "path_/login.user", 1, "would be allowed"},
		{[]string{"path", "/login"}, "exact:path_/login", "path_/login", 0, "only leads to nested descriptors"},
		{[]string{"path", "/login", "other", "x"}, "exact:path_/login none:", "", 0, "no node matches entry 2 (other=x)"},
		{[]string{"nothing", "x"}, "none:", "", 0, "no node matches entry 1"},
		{[]string{"tenant", "t-42"}, "wildcard:tenant_t-*", "tenant_t-*", 1, "would be allowed"},
		{[]string{"path", "/healthz"}, "exact:path_/healthz", "path_/healthz", 0, "unlimited"},
		{[]string{"pair", "p"}, "bare:pair", "pair", 2, "would be allowed"},
	} {
		ex := explain(t, f.svc, "edge", tc.kv...)
		if !ex.DomainKnown || ex.DomainFile != "limits.yaml" {
			t.Errorf("%v: domain known %v file %q, want known in limits.yaml", tc.kv, ex.DomainKnown, ex.DomainFile)
		}
		if got := matches(ex); got != tc.walk {
			t.Errorf("%v: walk %q, want %q", tc.kv, got, tc.walk)
		}
		if ex.Node != tc.node || len(ex.Limits) != tc.limits || !strings.Contains(ex.Outcome, tc.outcome) {
			t.Errorf("%v: node %q, %d limits, outcome %q; want %q, %d, containing %q", tc.kv, ex.Node, len(ex.Limits), ex.Outcome, tc.node, tc.limits, tc.outcome)
		}
	}

	ex := explain(t, f.svc, "nowhere", "a", "b")
	if ex.DomainKnown || len(ex.Levels) != 0 || len(ex.Limits) != 0 || !strings.Contains(ex.Outcome, "unknown domain") {
		t.Errorf("unknown domain: %+v", ex)
	}
	if ex := explain(t, f.svc, "edge", "tenant", "t-1"); !ex.Levels[0].ShareThreshold || ex.Levels[0].Pattern != "t-*" || ex.Levels[0].Line == 0 {
		t.Errorf("wildcard level: %+v, want share_threshold, pattern t-* and a line", ex.Levels[0])
	}

	for name, es := range map[string][]descriptors.Entry{"no entries": nil, "too many": make([]descriptors.Entry, MaxEntries+1)} {
		if _, err := f.svc.Explain(context.Background(), "edge", es); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := f.svc.Explain(context.Background(), "", entries("a", "b")); err == nil {
		t.Error("empty domain: no error")
	}
}

// TestExplainLimitsAndState: the limits' settings, keys the decisions use,
// and state read with a peek that consumes nothing.
func TestExplainLimitsAndState(t *testing.T) {
	f := newFixture(t, nil, Options{})
	login := desc("path", "/login", "user", "alice")

	ex := explain(t, f.svc, "edge", "path", "/login", "user", "alice")
	l := ex.Limits[0]
	wantLimit := ExplainedLimit{Name: "login", Index: 0, Line: l.Line,
		ExplainedRate: ExplainedRate{Algorithm: "fixed_window", RequestsPerUnit: 2, Unit: "hour", UnitMultiplier: 1, PeriodSeconds: 3600},
		FailureMode:   "allow", FailureModeDefault: true, Key: l.Key,
		State: &ExplainedState{Allowed: true, Remaining: 2, Capacity: 2, Reset: "0s"}, Reported: true}
	if l.Line == 0 || !equalLimit(l, wantLimit) {
		t.Errorf("fresh login limit:\n%s\nwant\n%s", jsonOf(l), jsonOf(wantLimit))
	}
	wantKey := descriptors.Key(descriptors.KeyInput{Domain: "edge", Entries: entries("path", "/login", "user", "alice"),
		Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 2, Period: time.Hour}})
	if l.Key != wantKey {
		t.Errorf("key %q, want %q", l.Key, wantKey)
	}

	// One request: the peek sees it, and peeking again consumes nothing.
	f.call(t, login)
	for range 3 {
		st := explain(t, f.svc, "edge", "path", "/login", "user", "alice").Limits[0].State
		// instant is 800 s into its hour.
		if *st != (ExplainedState{Allowed: true, Remaining: 1, Capacity: 2, Reset: "46m40s", ResetSeconds: 2800}) {
			t.Errorf("after one request: %+v", *st)
		}
	}
	check(t, f.call(t, login).Statuses[0], want{ok, "login", 0, 2800 * time.Second})
	ex = explain(t, f.svc, "edge", "path", "/login", "user", "alice")
	if st := ex.Limits[0].State; st.Allowed || st.Remaining != 0 || st.ResetSeconds != 2800 {
		t.Errorf("exhausted: %+v", *st)
	}
	if !strings.Contains(ex.Outcome, "refused (OVER_LIMIT) by login for 46m40s") {
		t.Errorf("exhausted: outcome %q", ex.Outcome)
	}

	// Buckets show their burst; a limit's own failure mode is not the
	// service's; shadow mode is the descriptor's.
	if l := explain(t, f.svc, "edge", "api_key", "k").Limits[0]; l.Burst != 2 || l.Algorithm != "token_bucket" || l.PeriodSeconds != 1 {
		t.Errorf("token bucket: %s", jsonOf(l))
	}
	if l := explain(t, f.svc, "edge", "strict", "s").Limits[0]; l.FailureMode != "deny" || l.FailureModeDefault {
		t.Errorf("strict: %s", jsonOf(l))
	}
	if l := explain(t, f.svc, "edge", "windowed", "w").Limits[0]; l.UnitMultiplier != 30 || l.PeriodSeconds != 30 || l.Unit != "second" || l.Burst != 0 {
		t.Errorf("windowed: %s", jsonOf(l))
	}
	f.call(t, desc("shadow", "x"))
	if ex := explain(t, f.svc, "edge", "shadow", "x"); !ex.Limits[0].Shadow || !strings.Contains(ex.Outcome, "shadow mode") {
		t.Errorf("shadow: %s", jsonOf(ex))
	}

	// share_threshold: every value of the wildcard shares its key.
	a, b := explain(t, f.svc, "edge", "tenant", "t-1"), explain(t, f.svc, "edge", "tenant", "t-2")
	if a.Limits[0].Key != b.Limits[0].Key || !strings.HasSuffix(a.Limits[0].Key, "6:tenant3:t-*") {
		t.Errorf("shared keys %q and %q, want one key ending in the pattern", a.Limits[0].Key, b.Limits[0].Key)
	}

	// A rate_limits list: one key per limit; the status reports the least
	// remaining.
	f.call(t, desc("pair", "p"))
	ex = explain(t, f.svc, "edge", "pair", "p")
	if len(ex.Limits) != 2 || ex.Limits[0].Key == ex.Limits[1].Key || ex.Limits[1].Index != 1 {
		t.Fatalf("pair: %s", jsonOf(ex))
	}
	// per-second: token bucket 2, 1 left; per-hour: fixed window 3, 2 left.
	if s0, s1 := ex.Limits[0].State, ex.Limits[1].State; s0.Remaining != 1 || s1.Remaining != 2 || !ex.Limits[0].Reported || ex.Limits[1].Reported {
		t.Errorf("pair: %s", jsonOf(ex.Limits))
	}
}

func TestExplainOptions(t *testing.T) {
	f := newFixture(t, nil, Options{KeyPrefix: "team:", HashValues: true, ShadowMode: true, FailureMode: config.FailDeny})
	f.call(t, desc("remote_address", "1.2.3.4"))
	l := explain(t, f.svc, "edge", "remote_address", "1.2.3.4").Limits[0]
	if !strings.HasPrefix(l.Key, "team:{") || strings.Contains(l.Key, "1.2.3.4") {
		t.Errorf("key %q: want the prefix team: and the value hashed", l.Key)
	}
	if l.State.Remaining != 2 {
		t.Errorf("state %+v: want the request counted under this key (2 remaining)", *l.State)
	}
	if !l.Shadow || l.FailureMode != "deny" || !l.FailureModeDefault {
		t.Errorf("limit %s: want shadow (-shadow-mode) and the service's failure mode deny", jsonOf(l))
	}
}

func TestExplainStoreFailure(t *testing.T) {
	f := newFixture(t, func(limits.Store) limits.Store { return failingStore{} }, Options{})
	ex := explain(t, f.svc, "edge", "remote_address", "x")
	if st := ex.Limits[0].State; st == nil || !strings.Contains(st.Error, "connection refused") || !strings.Contains(ex.Outcome, "failure mode") {
		t.Errorf("store failure: %s", jsonOf(ex))
	}
}

func TestExplainReplaced(t *testing.T) {
	const yaml = `
domain: edge
descriptors:
  - key: k
    rate_limits:
      - {name: old, unit: hour, requests_per_unit: 5}
      - {name: new, unit: hour, requests_per_unit: 50, replaces: [{name: old}]}
  - key: both
    rate_limits:
      - {name: a, unit: hour, requests_per_unit: 5, replaces: [{name: b}]}
      - {name: b, unit: hour, requests_per_unit: 6, replaces: [{name: a}]}
`
	d, err := config.Parse("limits.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nil, Options{})
	f.svc.SetIndex(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
	// As decided: only new counts.
	if st := f.call(t, desc("k", "v")).Statuses[0]; st.CurrentLimit.GetName() != "new" || st.LimitRemaining != 49 {
		t.Fatalf("decided: %v, want new with 49 remaining", st)
	}

	ex := explain(t, f.svc, "edge", "k", "v")
	old, nw := ex.Limits[0], ex.Limits[1]
	if old.ReplacedBy != "new" || old.State != nil || old.Key != "" || nw.State == nil || nw.State.Remaining != 49 || !nw.Reported {
		t.Errorf("replaced: %s", jsonOf(ex.Limits))
	}
	// Limits that replace each other: neither is decided.
	if st := f.call(t, desc("both", "v")).Statuses[0]; st.CurrentLimit != nil {
		t.Fatalf("decided: %v, want no limit", st)
	}
	if ex := explain(t, f.svc, "edge", "both", "v"); !strings.Contains(ex.Outcome, "replaced") || ex.Limits[0].ReplacedBy != "b" {
		t.Errorf("replaced by each other: %s", jsonOf(ex))
	}
}

func TestExplainText(t *testing.T) {
	f := newFixture(t, nil, Options{})
	f.call(t, desc("path", "/login", "user", "alice"))
	var b strings.Builder
	if err := explain(t, f.svc, "edge", "path", "/login", "user", "alice").WriteText(&b); err != nil {
		t.Fatal(err)
	}
	key := explain(t, f.svc, "edge", "path", "/login", "user", "alice").Limits[0].Key
	for _, want := range []string{
		"domain:     edge (limits.yaml)\n",
		"descriptor: path=/login, user=alice\n",
		`  1. path=/login: exact value "/login" -> node path_/login (line `,
		"  2. user=alice: bare key user (one counter per value) -> node path_/login.user (line ",
		"  [0] login: fixed_window, 2 per hour, failure mode allow (the service's), shadow false (line ",
		"      key:   " + key + "\n",
		"      state: remaining 1 of 2, reset 46m40s; a request of cost 1 would be allowed (the status reports this limit)\n",
		"outcome:    a request of cost 1 would be allowed now; the status would report login with 1 remaining\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	explain(t, f.svc, "edge", "path", "/nope").WriteText(&b) //nolint:errcheck // a Builder
	if !strings.Contains(b.String(), "  1. path=/nope: no match") {
		t.Errorf("text of a stopped walk:\n%s", b.String())
	}
}

func equalLimit(a, b ExplainedLimit) bool { return jsonOf(a) == jsonOf(b) }

func jsonOf(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// TestReplacedSiblingKeys: a limit keeps its key (its place in the file's
// list) when another descriptor of the request replaces a sibling before
// it, so it neither starts a new counter nor shares the sibling's; and
// Explain names the key the decisions use.
func TestReplacedSiblingKeys(t *testing.T) {
	const yaml = `
domain: edge
descriptors:
  - key: x
    rate_limits:
      - {name: a, unit: hour, requests_per_unit: 1}
      - {name: b, unit: hour, requests_per_unit: 10}
  - key: y
    rate_limit: {name: y, unit: hour, requests_per_unit: 100, replaces: [{name: a}]}
`
	d, err := config.Parse("limits.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nil, Options{})
	f.svc.SetIndex(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
	for i := range 2 {
		if st := f.call(t, desc("x", "1"), desc("y", "1")).Statuses[0]; st.CurrentLimit.GetName() != "b" || st.LimitRemaining != uint32(9-i) {
			t.Fatalf("with y, hit %d: %v, want b with %d remaining", i+1, st, 9-i)
		}
	}
	// Alone, a applies again, with nothing counted yet.
	resp := f.call(t, desc("x", "1"))
	if st := resp.Statuses[0]; resp.OverallCode != ok || st.CurrentLimit.GetName() != "a" || st.LimitRemaining != 0 {
		t.Fatalf("alone: %v, want OK, reporting a with 0 remaining", resp)
	}
	ex := explain(t, f.svc, "edge", "x", "1")
	if a, b := ex.Limits[0].State, ex.Limits[1].State; a.Remaining != 0 || b.Remaining != 7 {
		t.Errorf("explained: a %+v, b %+v; want 0 and 7 remaining", *a, *b)
	}
}

// Explain and Reset refuse what the decision refuses before planning, in
// the decision's words: the request's bounds, and a request that comes
// before any config (which Explain once answered as an unknown domain).
func TestExplainRefusesAsTheDecision(t *testing.T) {
	f := newFixture(t, nil, Options{})
	long := make([]string, 0, 2*(MaxEntries+1))
	for i := range MaxEntries + 1 {
		long = append(long, fmt.Sprint("k", i), "v")
	}
	for _, tc := range []struct {
		name     string
		domain   string
		kv       []string
		unloaded bool
	}{
		{"empty domain", "", []string{"remote_address", "1.2.3.4"}, false},
		{"no entries", "edge", nil, false},
		{"too many entries", "edge", long, false},
		{"no config yet", "edge", []string{"remote_address", "1.2.3.4"}, true},
	} {
		if tc.unloaded {
			f.svc.SetIndex(descriptors.NewIndex(nil))
		}
		_, decided := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
			Domain: tc.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(tc.kv...)}})
		st, _ := status.FromError(decided)
		if decided == nil || st.Message() == "" {
			t.Fatalf("%s: the decision answered %v, want an error", tc.name, decided)
		}
		_, explained := f.svc.Explain(context.Background(), tc.domain, entries(tc.kv...))
		_, reset := f.svc.Reset(context.Background(), tc.domain, entries(tc.kv...))
		for what, err := range map[string]error{"Explain": explained, "Reset": reset} {
			if err == nil || err.Error() != st.Message() {
				t.Errorf("%s: %s said %v, want the decision's %q", tc.name, what, err, st.Message())
			}
		}
	}
}
