package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

func mustFlags(t *testing.T, args ...string) *settings {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return c
}

func checkSums(t *testing.T, r *result) {
	t.Helper()
	if r.Calls == 0 {
		t.Fatal("no calls made")
	}
	if r.OK+r.OverLimit+r.Unknown+r.ErrorCount != r.Calls {
		t.Errorf("OK %d + OVER_LIMIT %d + UNKNOWN %d + errors %d != calls %d", r.OK, r.OverLimit, r.Unknown, r.ErrorCount, r.Calls)
	}
	if r.Decisions != r.OK+r.OverLimit+r.Unknown {
		t.Errorf("decisions %d", r.Decisions)
	}
	l := r.Latency
	if !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) || l.P50 <= 0 {
		t.Errorf("latency not ordered: %+v", l)
	}
	if r.Throughput <= 0 {
		t.Errorf("throughput %v", r.Throughput)
	}
}

func TestNoop(t *testing.T) {
	c := mustFlags(t, "-noop", "-duration", "300ms", "-concurrency", "4", "-conns", "2", "-keys", "100")
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.OK != r.Calls || r.ErrorCount != 0 {
		t.Errorf("a no-op answered OK %d of %d (errors %v %s)", r.OK, r.Calls, r.Errors, r.FirstError)
	}
}

func TestNoopOpenLoop(t *testing.T) {
	c := mustFlags(t, "-noop", "-duration", "300ms", "-rate", "1000", "-concurrency", "4")
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	// 300 calls are due; a loaded race-detector machine may fall behind,
	// but never send more than are due.
	if r.Calls > 300 || r.Calls < 30 {
		t.Errorf("open loop at 1000/s for 300ms made %d calls", r.Calls)
	}
}

const benchLimits = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {name: per-key, algorithm: fixed_window, unit: day, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
`

// serveService serves rls.Service over the embedded store on a real
// listener.
func serveService(t *testing.T) string {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(benchLimits))
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	svc, err := rls.New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), rls.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func TestServiceHotKeyGoesOverLimit(t *testing.T) {
	addr := serveService(t)
	c := mustFlags(t, "-addr", addr, "-duration", "300ms", "-concurrency", "4", "-descriptor", "api_key=hot{n}")
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	// 5 per day: the connection's first call took one of them.
	if r.OK != 4 || r.OverLimit != r.Calls-4 || r.ErrorCount != 0 {
		t.Errorf("OK %d, OVER_LIMIT %d of %d calls (errors %v %s); want 4 OK", r.OK, r.OverLimit, r.Calls, r.Errors, r.FirstError)
	}
}

func TestServiceManyKeys(t *testing.T) {
	addr := serveService(t)
	// Unlimited: every answer is OK.
	c := mustFlags(t, "-addr", addr, "-duration", "300ms", "-concurrency", "4", "-conns", "2", "-keys", "1000", "-descriptor", "free=u{n}", "-json")
	var out bytes.Buffer
	var r *result
	var err error
	if r, err = run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.OK != r.Calls || r.OverLimit != 0 {
		t.Errorf("unlimited: OK %d, OVER_LIMIT %d of %d", r.OK, r.OverLimit, r.Calls)
	}
	if err := r.writeJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Calls != r.Calls {
		t.Errorf("JSON round trip: %v, %d calls", err, back.Calls)
	}
}

func TestFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"-addr", "10.1.2.3:8081"},
		{"-addr", ":8081"},
		{"-serve-noop", "0.0.0.0:9000"},
		{"-duration", "11m"},
		{"-duration", "0s"},
		{"-concurrency", "0"},
		{"-conns", "0"},
		{"-keys", "0"},
		{"-rate", "-1"},
		{"-descriptor", "novalue"},
		{"-pids", "12x"},
		{"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	c := mustFlags(t, "-addr", "10.1.2.3:8081", "-allow-remote", "-pids", "1, 2", "-duration", "10m")
	if c.duration != 10*time.Minute || len(c.pids) != 2 {
		t.Errorf("got %+v", c)
	}
	c = mustFlags(t)
	if c.addr != "127.0.0.1:8081" || c.concurrency != 16 || c.conns != 1 || c.duration != 10*time.Second || c.timeout != time.Second || c.keys != 1 || c.domain != "edge" {
		t.Errorf("defaults: %+v", c)
	}
	mustFlags(t, "-addr", "localhost:8081")
	mustFlags(t, "-addr", "[::1]:8081")
}

func TestTemplate(t *testing.T) {
	c := mustFlags(t, "-keys", "3", "-descriptor", "plan=p{n},api_key=k{n}", "-hits", "2")
	reqs, err := requests(c)
	if err != nil || len(reqs) != 3 {
		t.Fatal(err, len(reqs))
	}
	e := reqs[2].Descriptors[0].Entries
	if len(e) != 2 || e[0].Key != "plan" || e[0].Value != "p2" || e[1].Value != "k2" || reqs[2].HitsAddend != 2 || reqs[2].Domain != "edge" {
		t.Errorf("request 2: %v", reqs[2])
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 1000 10\n"
	d, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 300 * time.Second / time.Duration(clockTicks); d != want {
		t.Errorf("got %v, want %v", d, want)
	}
	if _, err := parseStat([]byte("garbage")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestParseProcStat(t *testing.T) {
	stat := "cpu  100 5 50 800 10 1 2 32 0 0\ncpu0 50 2 25 400 5 0 1 16 0 0\ncpu1 50 3 25 400 5 1 1 16 0 0\nintr 1 2 3\n"
	got, err := parseProcStat([]byte(stat))
	want := []cpuTicks{{158, 32, 1000}, {78, 16, 499}, {80, 16, 501}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"intr 1 2 3", "cpu 1 2 3\n", "cpu  1 2 3 4 5 6 7 x\n"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestHostShares(t *testing.T) {
	t0 := []cpuTicks{{100, 10, 1000}, {50, 5, 500}, {50, 5, 500}}
	t1 := []cpuTicks{{250, 30, 1200}, {140, 15, 600}, {110, 15, 600}}
	steal, busy := hostShares(t0, t1)
	if steal != 0.1 || !slices.Equal(busy, []float64{0.9, 0.6}) {
		t.Errorf("got steal %v, busy %v; want 0.1, [0.9 0.6]", steal, busy)
	}
	if steal, busy := hostShares(nil, t1); steal != 0 || busy != nil {
		t.Errorf("no first reading: got %v, %v", steal, busy)
	}
}

func TestRealMainText(t *testing.T) {
	var out bytes.Buffer
	err := realMain(context.Background(), []string{"-noop", "-duration", "200ms", "-concurrency", "2", "-pids", strconv.Itoa(os.Getpid())}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"throughput", "p99.9", "OVER_LIMIT", "µs per decision"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// unavailableService answers every call UNAVAILABLE, as envoy-rls does in
// failure mode error with its store down.
type unavailableService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (unavailableService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return nil, status.Error(codes.Unavailable, "rate limit store unavailable")
}

// A server whose every answer is an error is measured, not given up on:
// the errors are counted by kind.
func TestEveryCallFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, unavailableService{})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	c := mustFlags(t, "-addr", ln.Addr().String(), "-duration", "300ms", "-concurrency", "2")
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if r.Calls == 0 || r.ErrorCount != r.Calls || r.OK != 0 {
		t.Errorf("calls %d, errors %d, OK %d; want every call an error", r.Calls, r.ErrorCount, r.OK)
	}
	if !strings.Contains(r.FirstError, "unavailable") {
		t.Errorf("first error %q", r.FirstError)
	}
}

// A server that is not there still stops the run at once.
func TestNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := mustFlags(t, "-addr", addr, "-duration", "300ms", "-concurrency", "1")
	if _, err := run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "first call") {
		t.Errorf("run against no server: %v, want the first call's error", err)
	}
}
