package rls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// This file tests the options behind the binary's flags for callers that
// are not trusted and for operations: -negative-hits, -hash-values,
// -redis-key-prefix and -shadow-mode.

func TestRefuseNegativeHits(t *testing.T) {
	refund := desc("remote_address", "x")
	refund.IsNegativeHits = true

	t.Run("default accepts", func(t *testing.T) {
		f := newFixture(t, nil, Options{})
		f.call(t, desc("remote_address", "x"))
		f.call(t, desc("remote_address", "x"))
		if got := f.call(t, refund).Statuses[0].LimitRemaining; got != 2 {
			t.Errorf("limit_remaining after a refund = %d, want 2", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		var cs *countingStore
		f := newFixture(t, func(s limits.Store) limits.Store { cs = &countingStore{Store: s}; return cs }, Options{RefuseNegativeHits: true})
		_, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", "k"), refund}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "descriptor 1") || !strings.Contains(err.Error(), "is_negative_hits") {
			t.Errorf("got %v, want InvalidArgument naming descriptor 1 and is_negative_hits", err)
		}
		if n := cs.hits.Load(); n != 0 {
			t.Errorf("a refused request reached the store with %d hits", n)
		}
		// Ordinary hits are still decided.
		check(t, f.call(t, desc("api_key", "k")).Statuses[0], want{ok, "per-key", 1, time.Second})
	})
}

// decisions returns rls_decisions_total{outcome} for the rule.
func decisions(t *testing.T, m *metrics.Metrics, rule, outcome string) float64 {
	t.Helper()
	return counted(t, m, "rls_decisions_total", map[string]string{"rule": rule, "outcome": outcome})
}

// counted returns the counter of family whose labels include want.
func counted(t *testing.T, m *metrics.Metrics, family string, want map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestGlobalShadowMode(t *testing.T) {
	m := metrics.New()
	f := newFixture(t, nil, Options{ShadowMode: true, Metrics: m})
	ip := desc("remote_address", "203.0.113.7")
	for range 3 {
		f.call(t, ip)
	}
	// Over the limit: decided as such, reported as OK.
	resp := f.call(t, ip, desc("api_key", "k"))
	if resp.OverallCode != ok {
		t.Errorf("overall = %v, want OK in shadow mode", resp.OverallCode)
	}
	st := resp.Statuses[0]
	if st.Code != ok || st.LimitRemaining != 0 || st.CurrentLimit.GetName() != "per-ip" {
		t.Errorf("status = %v, want OK with per-ip and 0 remaining", st)
	}
	if got := decisions(t, m, "per-ip", metrics.OutcomeShadowOver); got != 1 {
		t.Errorf("shadow_over_limit decisions of per-ip = %v, want 1", got)
	}
	if got := decisions(t, m, "per-ip", metrics.OutcomeOverLimit); got != 0 {
		t.Errorf("over_limit decisions of per-ip = %v, want 0", got)
	}
	// A cost that can never fit is not refused either.
	big := desc("api_key", "k2")
	big.HitsAddend = nil
	if resp, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 100,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{big}}); err != nil || resp.OverallCode != ok {
		t.Errorf("a hit that never fits: %v, %v; want OK", resp.GetOverallCode(), err)
	}

	t.Run("failure_mode deny", func(t *testing.T) {
		m := metrics.New()
		f := newFixture(t, func(limits.Store) limits.Store { return failingStore{} }, Options{ShadowMode: true, FailureMode: config.FailDeny, Metrics: m})
		resp := f.call(t, desc("remote_address", "x"), desc("strict", "y"))
		if resp.OverallCode != ok || resp.Statuses[0].Code != ok || resp.Statuses[1].Code != ok {
			t.Errorf("got %v, want OK everywhere in shadow mode", resp)
		}
		if got := resp.Statuses[0].LimitRemaining; got != 3 {
			t.Errorf("limit_remaining = %d, want the whole quota (3), as failing open reports", got)
		}
		if got := decisions(t, m, "strict", metrics.OutcomeShadowOver); got != 1 {
			t.Errorf("shadow_over_limit decisions of strict = %v, want 1", got)
		}
		if got := decisions(t, m, "strict", metrics.OutcomeFailedDeny); got != 0 {
			t.Errorf("store_failed_deny decisions of strict = %v, want 0", got)
		}
	})
}

func TestKeyPrefixAndHashValues(t *testing.T) {
	const secret = "sk-live-0123456789"
	var rs *storetest.Recording
	f := newFixture(t, func(s limits.Store) limits.Store { rs = &storetest.Recording{Store: s}; return rs },
		Options{KeyPrefix: "team-a:", HashValues: true})
	check(t, f.call(t, desc("api_key", secret)).Statuses[0], want{ok, "per-key", 1, time.Second})
	check(t, f.call(t, desc("api_key", secret)).Statuses[0], want{ok, "per-key", 0, 2 * time.Second})
	// Another value has its own counter.
	check(t, f.call(t, desc("api_key", secret+"x")).Statuses[0], want{ok, "per-key", 1, time.Second})
	keys := rs.Take()
	if len(keys) != 3 {
		t.Fatalf("store saw keys %q, want 3", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "team-a:{") {
			t.Errorf("key %q does not start with the prefix and hash tag", k)
		}
		if strings.Contains(k, secret) {
			t.Errorf("key %q holds the descriptor value", k)
		}
	}
	want := descriptors.Key(descriptors.KeyInput{Domain: "edge", Entries: []descriptors.Entry{{Key: "api_key", Value: secret}},
		Limit: apiKeyLimit(t, f), Prefix: "team-a:", HashValues: true})
	if keys[0] != want {
		t.Errorf("key %q, want %q", keys[0], want)
	}

	if _, err := New(f.svc.Index(), Options{Store: rs, KeyPrefix: "a{b}"}); err == nil {
		t.Error("New accepted a key prefix with braces")
	}
}

// apiKeyLimit is the limit of the fixture's api_key rule.
func apiKeyLimit(t *testing.T, f *fixture) limits.Limit {
	t.Helper()
	node, _, _ := f.svc.Index().Match("edge", []descriptors.Entry{{Key: "api_key", Value: "v"}}, nil)
	if node == nil || len(node.Descriptor.Rules) != 1 {
		t.Fatal("no api_key rule in the fixture")
	}
	return node.Descriptor.Rules[0].Limit
}

// keyEchoingStore fails every hit with an error that quotes its key, as a
// store error may.
type keyEchoingStore struct{}

func (keyEchoingStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	for i, h := range hits {
		results[i] = limits.Result{Err: errors.New("cannot decide " + h.Key)}
	}
}

// TestHashValuesNeverLogged: with -hash-values, a value reaches no log line,
// not even through a store error that quotes the key.
func TestHashValuesNeverLogged(t *testing.T) {
	const secret = "sk-live-0123456789"
	for _, mode := range []config.FailureMode{config.FailAllow, config.FailError} {
		core, logs := observer.New(zapcore.DebugLevel)
		f := newFixture(t, func(limits.Store) limits.Store { return keyEchoingStore{} },
			Options{HashValues: true, FailureMode: mode, Logger: zap.New(core)})
		_, err := f.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("api_key", secret)}})
		if mode == config.FailError && (err == nil || strings.Contains(err.Error(), secret)) {
			t.Errorf("%s: error %v, want UNAVAILABLE without the value", mode, err)
		}
		if logs.Len() == 0 {
			t.Fatalf("%s: no log line about the failed store call", mode)
		}
		for _, e := range logs.All() {
			line := fmt.Sprint(e.Message, e.ContextMap())
			if strings.Contains(line, secret) {
				t.Errorf("%s: log line holds the value: %s", mode, line)
			}
		}
	}
}

// deadlineStore records whether each call's context had a deadline.
type deadlineStore struct {
	limits.Store
	mu        sync.Mutex
	deadlines []bool
}

func (d *deadlineStore) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	_, ok := ctx.Deadline()
	d.mu.Lock()
	d.deadlines = append(d.deadlines, ok)
	d.mu.Unlock()
	d.Store.Decide(ctx, hits, results)
}

// TestStoreInProcess: a remote store's call is bounded by -store-timeout
// even when the request has no deadline; an in-process store's is not
// wrapped in a timer of its own.
func TestStoreInProcess(t *testing.T) {
	for _, inProcess := range []bool{false, true} {
		var ds *deadlineStore
		f := newFixture(t, func(s limits.Store) limits.Store { ds = &deadlineStore{Store: s}; return ds },
			Options{StoreInProcess: inProcess})
		check(t, f.call(t, desc("api_key", "k")).Statuses[0], want{ok, "per-key", 1, time.Second})
		if len(ds.deadlines) != 1 || ds.deadlines[0] == inProcess {
			t.Errorf("StoreInProcess %v: store calls had deadlines %v, want [%v]", inProcess, ds.deadlines, !inProcess)
		}
	}
}
