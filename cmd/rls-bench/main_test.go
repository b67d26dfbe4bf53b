package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/procfs"
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
	return serveLimits(t, benchLimits)
}

// serveLimits serves rls.Service with the domain of limits over the
// embedded store on a real listener.
func serveLimits(t *testing.T, limits string) string {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(limits))
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

// The CPU time of a process and of the machine, read from a /proc of
// testdata: a command name with spaces and parentheses, and two CPUs.
func TestProcCPU(t *testing.T) {
	fs, err := procfs.NewFS("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	d, err := processCPU(fs, 1234)
	if err != nil || d != 3*time.Second {
		t.Errorf("process 1234: got %v, %v; want 3s (300 ticks of 100 Hz)", d, err)
	}
	if _, err := processCPU(fs, 99999); err == nil {
		t.Error("no process 99999, no error")
	}
	st, err := fs.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got := hostCPUs(st)
	want := []cpuTicks{{1.58, 0.32, 10}, {0.78, 0.16, 4.99}, {0.80, 0.16, 5.01}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if math.Abs(got[i].busy-want[i].busy) > 1e-9 || math.Abs(got[i].steal-want[i].steal) > 1e-9 || math.Abs(got[i].total-want[i].total) > 1e-9 {
			t.Errorf("cpu line %d: got %v, want %v", i, got[i], want[i])
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

// The latencies of all callers, merged: each percentile at or above the
// true one and within the histogram's precision (1/128), the minimum at or
// below it, the count exact, p99.9 told apart from p99 when a few calls
// are slow, and a latency out of range counted at its end.
func TestSummarizeLatency(t *testing.T) {
	c := mustFlags(t, "-noop")
	const n = 100_000
	vals := make([]time.Duration, n)
	for i := range vals {
		vals[i] = time.Duration(i+1) * 10 * time.Microsecond
	}
	a, b := &worker{h: newLatencies()}, &worker{h: newLatencies()}
	for i, v := range vals {
		recordLatency([]*worker{a, b}[i%2].h, v)
	}
	r := summarize(c, "x", []*worker{a, b}, time.Second)
	if r.Calls != n {
		t.Errorf("calls %d, want %d", r.Calls, n)
	}
	for _, p := range []struct {
		q   float64
		got float64
	}{{50, r.Latency.P50}, {90, r.Latency.P90}, {99, r.Latency.P99}, {99.9, r.Latency.P999}, {100, r.Latency.Max}} {
		exact := float64(vals[int(p.q/100*n)-1].Microseconds())
		if p.got < exact || p.got > exact*(1+1.0/128) {
			t.Errorf("p%v = %.1fµs, exact %.1fµs: outside [exact, exact+1/128]", p.q, p.got, exact)
		}
	}
	if r.Latency.Min > 10 || r.Latency.Min < 10*(1-1.0/128) || math.Abs(r.Latency.Mean-500_005)/500_005 > 1.0/128 {
		t.Errorf("min %.2fµs mean %.1fµs, want ≈10 and ≈500005", r.Latency.Min, r.Latency.Mean)
	}

	skewed := &worker{h: newLatencies()}
	for range 990 {
		recordLatency(skewed.h, 50*time.Microsecond)
	}
	for range 10 {
		recordLatency(skewed.h, 10*time.Millisecond)
	}
	r = summarize(c, "x", []*worker{skewed}, time.Second)
	if l := r.Latency; l.P99 < 50 || l.P99 > 50.4 || l.P999 < 10_000 || l.P999 > 10_080 {
		t.Errorf("p99 %.1fµs p99.9 %.1fµs, want ≈50µs and ≈10ms", l.P99, l.P999)
	}

	out := &worker{h: newLatencies()}
	recordLatency(out.h, -time.Second) // a clock step: counted as 0
	recordLatency(out.h, 2*maxLatency)
	r = summarize(c, "x", []*worker{out}, time.Second)
	if l := r.Latency; r.Calls != 2 || l.Min != 0 || l.Max < maxLatency.Seconds()*1e6 || l.Max > maxLatency.Seconds()*1e6*(1+1.0/128) {
		t.Errorf("calls %d min %.1fµs max %.1fµs, want 2, 0 and ≈%v", r.Calls, l.Min, l.Max, maxLatency)
	}
}
