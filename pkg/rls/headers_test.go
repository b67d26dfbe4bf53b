package rls

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// headerLimits have waits that are easy to compute at headerInstant.
const headerLimits = `
domain: edge
descriptors:
  - key: user
    rate_limit: {name: per-user, algorithm: fixed_window, unit: hour, requests_per_unit: 2}
  - key: ip
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 5}
  - key: odd
    rate_limit: {name: 'say "hi" \ é', algorithm: fixed_window, unit: second, unit_multiplier: 30, requests_per_unit: 3}
  - key: bucket
    rate_limit: {name: bucket, algorithm: token_bucket, unit: second, requests_per_unit: 1, burst: 2}
  - key: strict
    rate_limit: {name: strict, algorithm: fixed_window, unit: hour, requests_per_unit: 1, failure_mode: deny}
  - key: path
    value: /healthz
    rate_limit: {unlimited: true}
`

// headerInstant is 2023-11-14T22:13:20.3Z: 800.3 s into an hour (2799.7 s
// left, 2800 rounded up), 20.3 s into a minute (39.7 s left: 40) and into a
// 30-second window (9.7 s left: 10).
const headerInstant = instant + 300_000

// grpcFixture is a Service on a fixed-clock embedded store, served over
// real gRPC (an in-memory listener).
type grpcFixture struct {
	client rlsv3.RateLimitServiceClient
	clock  atomic.Int64
}

func newGRPCFixture(t *testing.T, yaml string, wrap func(limits.Store) limits.Store, opts Options) *grpcFixture {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := &grpcFixture{}
	f.clock.Store(headerInstant)
	store := memory.New(memory.Options{Now: f.clock.Load, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	opts.Store = store
	if wrap != nil {
		opts.Store = wrap(store)
	}
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.client = rlsv3.NewRateLimitServiceClient(conn)
	return f
}

func (f *grpcFixture) call(t *testing.T, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := f.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// headerList renders response_headers_to_add as `key: value` lines.
func headerList(resp *rlsv3.RateLimitResponse) []string {
	var out []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		out = append(out, h.GetKey()+": "+h.GetValue())
	}
	return out
}

func checkAnswer(t *testing.T, step string, resp *rlsv3.RateLimitResponse, code rlsv3.RateLimitResponse_Code, headers []string, body string) {
	t.Helper()
	if resp.GetOverallCode() != code {
		t.Errorf("%s: overall code %v, want %v", step, resp.GetOverallCode(), code)
	}
	if got := headerList(resp); strings.Join(got, "\n") != strings.Join(headers, "\n") {
		t.Errorf("%s: response_headers_to_add\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(headers, "\n"))
	}
	if got := string(resp.GetRawBody()); got != body {
		t.Errorf("%s: raw_body %q, want %q", step, got, body)
	}
	if len(resp.GetRequestHeadersToAdd()) != 0 {
		t.Errorf("%s: request_headers_to_add %v, want none", step, resp.GetRequestHeadersToAdd())
	}
}

// TestResponseHeaders: with -response-headers and -json-429-body, the
// headers and body appear with exact values; without them, nothing does.
func TestResponseHeaders(t *testing.T) {
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	user, ip := desc("user", "alice"), desc("ip", "10.0.0.1")

	t.Run("off by default", func(t *testing.T) {
		f := newGRPCFixture(t, headerLimits, nil, Options{})
		for _, step := range []string{"first", "second"} {
			checkAnswer(t, step, f.call(t, user), ok, nil, "")
		}
		checkAnswer(t, "refused", f.call(t, user), over, nil, "")
	})

	t.Run("headers", func(t *testing.T) {
		f := newGRPCFixture(t, headerLimits, nil, Options{Headers: []HeaderDialect{IETFHeaders}})
		// The least remaining: per-user (1 of 2) rather than the unnamed
		// ip limit (4 of 5), whatever the order.
		checkAnswer(t, "first", f.call(t, ip, user), ok, []string{
			`RateLimit-Policy: "per-user";q=2;w=3600`,
			`RateLimit: "per-user";r=1;t=2800`,
		}, "")
		checkAnswer(t, "second", f.call(t, user, ip), ok, []string{
			`RateLimit-Policy: "per-user";q=2;w=3600`,
			`RateLimit: "per-user";r=0;t=2800`,
		}, "")
		// Refused: Retry-After is the refusal's wait, rounded up; no body
		// without -json-429-body.
		checkAnswer(t, "refused", f.call(t, ip, user), over, []string{
			`RateLimit-Policy: "per-user";q=2;w=3600`,
			`RateLimit: "per-user";r=0;t=2800`,
			`Retry-After: 2800`,
		}, "")
		// An unnamed limit is "default".
		checkAnswer(t, "unnamed", f.call(t, desc("ip", "10.0.0.2")), ok, []string{
			`RateLimit-Policy: "default";q=5;w=60`,
			`RateLimit: "default";r=4;t=40`,
		}, "")
		// A name is quoted as a structured-field String; w counts the
		// multiplier.
		checkAnswer(t, "quoted", f.call(t, desc("odd", "x")), ok, []string{
			`RateLimit-Policy: "say \"hi\" \\ ?";q=3;w=30`,
			`RateLimit: "say \"hi\" \\ ?";r=2;t=10`,
		}, "")
		// No limit, unlimited, unknown domain: no headers.
		checkAnswer(t, "no limit", f.call(t, desc("other", "x"), desc("path", "/healthz")), ok, nil, "")
	})

	t.Run("longest wait among the refusals", func(t *testing.T) {
		f := newGRPCFixture(t, headerLimits, nil, Options{Headers: []HeaderDialect{IETFHeaders, JSON429Body}})
		b := desc("bucket", "b")
		f.call(t, user)
		f.call(t, user)
		f.call(t, b)
		f.call(t, b)
		// Both refuse: the bucket for 1 s, per-user for 2799.7 s.
		checkAnswer(t, "both refused", f.call(t, b, user), over, []string{
			`RateLimit-Policy: "per-user";q=2;w=3600`,
			`RateLimit: "per-user";r=0;t=2800`,
			`Retry-After: 2800`,
			`content-type: application/json`,
		}, `{"error":"rate limited","retry_after_seconds":2800,"limit":"per-user"}`)
		// Half a second later the bucket still refuses, with 0.5 s to wait.
		f.clock.Add(500_000)
		checkAnswer(t, "bucket refused", f.call(t, b, desc("ip", "10.0.0.3")), over, []string{
			`RateLimit-Policy: "bucket";q=1;w=1`,
			`RateLimit: "bucket";r=0;t=1`,
			`Retry-After: 1`,
			`content-type: application/json`,
		}, `{"error":"rate limited","retry_after_seconds":1,"limit":"bucket"}`)
	})

	t.Run("json body alone", func(t *testing.T) {
		f := newGRPCFixture(t, headerLimits, nil, Options{Headers: []HeaderDialect{JSON429Body}})
		checkAnswer(t, "allowed", f.call(t, user), ok, nil, "")
		f.call(t, user)
		checkAnswer(t, "refused", f.call(t, user), over, []string{`content-type: application/json`},
			`{"error":"rate limited","retry_after_seconds":2800,"limit":"per-user"}`)
	})

	t.Run("unknown state", func(t *testing.T) {
		// The store fails: strict fails closed, per-user fails open. Their
		// state is unknown, so only the policy is sent.
		fail := func(limits.Store) limits.Store { return failingStore{} } // service_test.go
		f := newGRPCFixture(t, headerLimits, fail, Options{Headers: []HeaderDialect{IETFHeaders, JSON429Body}})
		checkAnswer(t, "fail closed", f.call(t, user, desc("strict", "s")), over, []string{
			`RateLimit-Policy: "strict";q=1;w=3600`,
			`content-type: application/json`,
		}, `{"error":"rate limited","limit":"strict"}`)
		checkAnswer(t, "fail open", f.call(t, user), ok, []string{
			`RateLimit-Policy: "per-user";q=2;w=3600`,
		}, "")
	})
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{
		"":           `""`,
		"per-ip":     `"per-ip"`,
		`a"b\c`:      `"a\"b\\c"`,
		"tab\there":  `"tab?here"`,
		"été":        `"?t?"`,
		"crlf\r\nx":  `"crlf??x"`,
		"日本":         `"??"`,
		"del\x7fend": `"del?end"`,
	} {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, time.Microsecond: 1, time.Second: 1,
		time.Second + time.Microsecond: 2, 2799700 * time.Millisecond: 2800,
	} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
