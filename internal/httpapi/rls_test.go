package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// fixedClock is a store clock that stands still: 2023-11-14T22:13:20Z.
func fixedClock() int64 { return 1_700_000_000_000_000 }

// rlsLimits is a small config covering what a /json request can reach:
// bare keys, wildcards, nesting, rate_limits lists, unlimited, shadow and
// quota modes, replaces, every algorithm but leaky_bucket.
//
// leaky_bucket is left out on purpose: a descriptor's limit override on a
// leaky_bucket rule keeps the rule's burst with the override's rate, and
// nothing bounds the resulting wait by -max-delay, so a /json request
// (which has no deadline) with {"limit":{"requestsPerUnit":1,"unit":"HOUR"}}
// on a leaky descriptor waits an hour, and answers 500 when the client gives
// up. Until that is bounded the fuzz target would hang on such inputs.
const rlsLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, unit: minute, requests_per_unit: 3}
  - key: api_key
    rate_limit: {name: per-key, algorithm: token_bucket, unit: second, requests_per_unit: 5, burst: 10}
  - key: path
    value: /api/*
    descriptors:
      - key: user
        rate_limits:
          - {name: user-log, algorithm: sliding_log, unit: second, requests_per_unit: 5}
          - {name: user-hour, algorithm: fixed_window, unit: hour, requests_per_unit: 100}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
  - key: tenant
    value: "t-*"
    share_threshold: true
    rate_limit: {name: tenants, unit: hour, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadowed, unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {name: soft, unit: hour, requests_per_unit: 1}
  - key: strict
    rate_limit: {name: strict, unit: hour, requests_per_unit: 1, failure_mode: deny}
  - key: plan
    value: gold
    rate_limit: {name: gold, unit: hour, requests_per_unit: 100, replaces: [{name: per-ip}]}
  - key: charged
    rate_limit: {name: charged, algorithm: fixed_window, unit: hour, requests_per_unit: 5, count_refused: true}
`

// newRLSHandler is the HTTP API over a real rls.Service on the embedded
// store, with rlsLimits loaded. now is the store's clock, nil for the
// process clock.
func newRLSHandler(tb testing.TB, now func() int64) (http.Handler, *metrics.Metrics) {
	tb.Helper()
	d, err := config.Parse("limits.yaml", []byte(rlsLimits))
	if err != nil {
		tb.Fatal(err)
	}
	store := memory.New(memory.Options{MaxKeys: 10_000, SweepInterval: -1, Now: now})
	tb.Cleanup(func() { store.Close() })
	m := metrics.New()
	svc, err := rls.New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}),
		rls.Options{Store: store, Metrics: m})
	if err != nil {
		tb.Fatal(err)
	}
	return Handler(Options{Limiter: svc, ConfigLines: func() []string { return nil }, Gatherer: m.Registry}), m
}

// postJSON posts body to /json with a deadline, as a careful client would.
func postJSON(h http.Handler, body []byte) (code int, contentType string, out []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "POST", "/json", bytes.NewReader(body)))
	res := rec.Result()
	out, _ = io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), out
}
