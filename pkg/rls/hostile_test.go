package rls_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// What a hostile client sends: too many descriptors or entries, huge
// values, a new value or domain every time. These tests go through real
// gRPC, as Envoy's calls do.

const hostileLimits = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, unit: minute, requests_per_unit: 3}
  - key: path
    value: /api/*
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 100}
`

type hostile struct {
	svc     *rls.Service
	client  rlsv3.RateLimitServiceClient
	store   *storetest.Recording
	metrics *metrics.Metrics
}

// newHostile serves hostileLimits over gRPC on an in-memory listener, on
// the embedded store with a clock that stands still.
func newHostile(t *testing.T) *hostile {
	t.Helper()
	d, err := config.Parse("limits.yaml", []byte(hostileLimits))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.New(memory.Options{SweepInterval: -1, Now: func() int64 { return 1_700_000_000_000_000 }})
	t.Cleanup(func() { mem.Close() })
	h := &hostile{store: &storetest.Recording{Store: mem}, metrics: metrics.New()}
	h.svc, err = rls.New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}),
		rls.Options{Store: h.store, Metrics: h.metrics})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, h.svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///rls",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h.client = rlsv3.NewRateLimitServiceClient(conn)
	return h
}

func entries(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// call sends a request over gRPC.
func (h *hostile) call(domain string, ds ...*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	return h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
}

// callDirect calls the service without gRPC, where many calls must be fast.
func (h *hostile) callDirect(domain string, ds ...*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	return h.svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
}

// One descriptor or one entry too many is InvalidArgument, before any store
// call; the bounds themselves are decided.
func TestRequestBounds(t *testing.T) {
	h := newHostile(t)
	ip := entries("remote_address", "10.0.0.1")
	many := func(n int) []*ratelimitv3.RateLimitDescriptor {
		ds := make([]*ratelimitv3.RateLimitDescriptor, n)
		for i := range ds {
			ds[i] = entries("remote_address", fmt.Sprint("10.0.1.", i))
		}
		return ds
	}
	long := func(n int) *ratelimitv3.RateLimitDescriptor {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprint("k", i), "v")
		}
		return entries(kv...)
	}
	for _, tt := range []struct {
		name  string
		ds    []*ratelimitv3.RateLimitDescriptor
		want  codes.Code
		msg   string
		calls int // store calls
	}{
		{"64 descriptors", many(rls.MaxDescriptors), codes.OK, "", 1},
		{"65 descriptors", many(rls.MaxDescriptors + 1), codes.InvalidArgument, "65 descriptors, above the maximum of 64", 0},
		{"32 entries", []*ratelimitv3.RateLimitDescriptor{long(rls.MaxEntries)}, codes.OK, "", 0}, // no limit matches
		{"33 entries", []*ratelimitv3.RateLimitDescriptor{long(rls.MaxEntries + 1)}, codes.InvalidArgument, "descriptor 0 has 33 entries, above the maximum of 32", 0},
		{"33 entries after good ones", []*ratelimitv3.RateLimitDescriptor{ip, ip, long(rls.MaxEntries + 1)}, codes.InvalidArgument, "descriptor 2 has 33 entries", 0},
		{"65 descriptors of an unknown domain", many(rls.MaxDescriptors + 1), codes.InvalidArgument, "65 descriptors", 0},
	} {
		domain := "edge"
		if strings.Contains(tt.name, "unknown") {
			domain = "other"
		}
		resp, err := h.call(domain, tt.ds...)
		s, _ := status.FromError(err)
		if s.Code() != tt.want || !strings.Contains(s.Message(), tt.msg) {
			t.Errorf("%s: got %v, want %v %q", tt.name, err, tt.want, tt.msg)
			continue
		}
		if err == nil && len(resp.Statuses) != len(tt.ds) {
			t.Errorf("%s: got %d statuses, want %d", tt.name, len(resp.Statuses), len(tt.ds))
		}
		if keys := h.store.Take(); (len(keys) > 0) != (tt.calls > 0) {
			t.Errorf("%s: the store decided %d hits, want %d calls", tt.name, len(keys), tt.calls)
		}
	}
}

// A 100 kB value is decided as any other: allowed, counted under a key of
// bounded length, on a counter that the same value finds again and another
// long value (differing in its last byte only) does not. Nested, it still
// reaches its limit.
func TestLongValue(t *testing.T) {
	h := newHostile(t)
	long := strings.Repeat("a", 100_000)
	other := long[:len(long)-1] + "b"
	keyOf := map[string]string{}
	for i, c := range []struct {
		value     string
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{long, rlsv3.RateLimitResponse_OK, 2},
		{long, rlsv3.RateLimitResponse_OK, 1},
		{other, rlsv3.RateLimitResponse_OK, 2},
		{long, rlsv3.RateLimitResponse_OK, 0},
		{long, rlsv3.RateLimitResponse_OVER_LIMIT, 0},
		{other, rlsv3.RateLimitResponse_OK, 1},
	} {
		resp, err := h.call("edge", entries("remote_address", c.value))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		st := resp.Statuses[0]
		if st.Code != c.code || st.LimitRemaining != c.remaining || st.CurrentLimit.GetName() != "per-ip" {
			t.Errorf("call %d: got %v with %d remaining (%q), want %v with %d of per-ip", i, st.Code, st.LimitRemaining, st.CurrentLimit.GetName(), c.code, c.remaining)
		}
		keys := h.store.Take()
		if len(keys) != 1 {
			t.Fatalf("call %d: the store got %d hits, want 1", i, len(keys))
		}
		if len(keys[0]) > 128 {
			t.Errorf("call %d: key of %d bytes for a 100 kB value: %q", i, len(keys[0]), keys[0])
		}
		name := c.value[len(c.value)-1:]
		if k, ok := keyOf[name]; ok && k != keys[0] {
			t.Errorf("call %d: the same value got keys %q and %q", i, k, keys[0])
		}
		keyOf[name] = keys[0]
	}
	if keyOf["a"] == keyOf["b"] {
		t.Errorf("two long values share key %q", keyOf["a"])
	}

	// Long values on two levels, through a wildcard.
	resp, err := h.call("edge", entries("path", "/api/"+long, "user", other))
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != 99 {
		t.Errorf("nested long values: got %v with %d remaining, want OK with 99", st.Code, st.LimitRemaining)
	}
	if keys := h.store.Take(); len(keys) != 1 || len(keys[0]) > 128 {
		t.Errorf("nested long values: keys %q, want one of at most 128 bytes", keys)
	}
}

// Metric labels come from the config, never from requests: 10,000 requests
// with a new address, a new unknown key's value and a new domain each leave
// rls_decisions_total with the few series the config allows.
func TestDecisionSeriesAreBounded(t *testing.T) {
	h := newHostile(t)
	const n = 10_000
	for i := range n {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)
		if _, err := h.callDirect("edge",
			entries("remote_address", ip),
			entries("remote_address", "203.0.113.1"), // over the limit after 3
			entries("session", fmt.Sprint("s", i)),
			entries("path", fmt.Sprint("/api/", i), "user", fmt.Sprint("u", i)),
		); err != nil {
			t.Fatal(err)
		}
		if _, err := h.callDirect(fmt.Sprint("domain-", i), entries("remote_address", ip)); err != nil {
			t.Fatal(err)
		}
		// Refused requests are counted by code, not by what they held.
		if i%100 == 0 {
			h.callDirect(fmt.Sprint("bad-", i))
		}
	}
	mfs, err := h.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "rls_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			series[mf.GetName()] = append(series[mf.GetName()], strings.Join(labels, ","))
		}
	}
	decisions := series["rls_decisions_total"]
	sort.Strings(decisions)
	want := []string{
		"domain=edge,outcome=no_limit,rule=",
		"domain=edge,outcome=ok,rule=path_/api/*.user",
		"domain=edge,outcome=ok,rule=per-ip",
		"domain=edge,outcome=over_limit,rule=per-ip",
		"domain=unknown,outcome=no_limit,rule=",
	}
	if strings.Join(decisions, "\n") != strings.Join(want, "\n") {
		t.Errorf("rls_decisions_total series after %d requests:\n%s\nwant\n%s", 2*n, strings.Join(decisions, "\n"), strings.Join(want, "\n"))
	}
	total := 0
	for name, s := range series {
		total += len(s)
		t.Logf("%s: %d series", name, len(s))
	}
	if requests := series["rls_requests_total"]; len(requests) > 4 {
		t.Errorf("rls_requests_total has %d series: %q", len(requests), requests)
	}
	// The series that do not depend on requests (gauges, counters
	// without labels) and the few above: a bound that does not grow.
	if total > 22 {
		t.Errorf("%d rls_ series after %d requests, want at most 22", total, 2*n)
	}
}
