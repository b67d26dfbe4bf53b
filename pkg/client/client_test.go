package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// TestDial: a plaintext, a TLS and a mutual-TLS service each answer the
// same decisions; a client without what the server requires gets no
// answer (the failure mode decides), never a decision of the service.
func TestDial(t *testing.T) {
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "app")
	trust := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool()}
	mutual := trust.Clone()
	mutual.Certificates = []tls.Certificate{redistest.KeyPair(t, cert, key)}
	cases := []struct {
		name   string
		server *tls.Config
		good   []client.Option
		bad    []client.Option // a client the server must not answer
	}{
		{"plain", nil, nil, []client.Option{client.WithTLS(trust)}},
		{"tls", serverTLS(t, ca, false), []client.Option{client.WithTLS(trust)}, nil},
		{"mtls", serverTLS(t, ca, true), []client.Option{client.WithTLS(mutual)}, []client.Option{client.WithTLS(trust)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, memoryService(t), tc.server)
			c := dial(t, addr, tc.good...)
			for i := range 3 {
				if d := check(t, c, 0, user("ann")); !d.Allowed || d.Code != rlsv3.RateLimitResponse_OK || d.Unavailable != nil {
					t.Fatalf("check %d: %+v, want allowed by the service", i, d)
				}
			}
			d := check(t, c, 0, user("ann"))
			if d.Allowed || d.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("fourth check: %+v, want OVER_LIMIT", d)
			}
			refused := check(t, dial(t, addr, append(tc.bad, client.WithTimeout(time.Second), client.WithFailureMode(client.FailClosed))...), 0, user("bob"))
			if refused.Allowed || refused.Unavailable == nil || refused.Response != nil {
				t.Fatalf("a client the server does not accept: %+v, want refused by the failure mode", refused)
			}
		})
	}
}

// TestCheckRequest: Check sends the domain, every descriptor and the hits,
// and the decision carries the statuses, the wait and the headers.
func TestCheckRequest(t *testing.T) {
	c := dial(t, serve(t, memoryService(t), nil))
	route := client.Descriptor{{Key: "route", Value: "/orders"}}
	d := check(t, c, 2, user("ann"), route)
	st := d.Response.GetStatuses()
	if len(st) != 2 {
		t.Fatalf("%d statuses, want 2 (one per descriptor)", len(st))
	}
	if got, want := st[0].GetLimitRemaining(), uint32(1); got != want {
		t.Errorf("user's remaining after 2 hits of 3: got %d, want %d", got, want)
	}
	if got, want := st[1].GetLimitRemaining(), uint32(999998); got != want {
		t.Errorf("route's remaining after 2 hits of 1,000,000: got %d, want %d", got, want)
	}
	if got := d.RetryAfter(); got != 0 {
		t.Errorf("allowed decision's RetryAfter %v, want 0", got)
	}
	d = check(t, c, 2, user("ann"))
	if d.Allowed {
		t.Fatal("2 more hits of a limit with 1 left were allowed")
	}
	if got := d.RetryAfter(); got <= 0 || got > maxWait {
		t.Errorf("refused decision's RetryAfter %v, want within (0, %v]", got, maxWait)
	}
	h := make(map[string][]string)
	d.WriteHeaders(h)
	if got := h["X-Ratelimit-Limit"]; len(got) != 1 || !strings.HasPrefix(got[0], "3, 3;w=3600") {
		t.Errorf("X-RateLimit-Limit %q, want 3, 3;w=3600...", got)
	}
	if got := h["Retry-After"]; len(got) != 1 || got[0] == "0" {
		t.Errorf("Retry-After %q, want the wait in seconds", got)
	}
}

// TestConcurrentChecks: one Client shared by many goroutines counts every
// hit once: exactly the limit is allowed.
func TestConcurrentChecks(t *testing.T) {
	c := dial(t, serve(t, memoryService(t), nil))
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if check(t, c, 0, user("shared"), client.Descriptor{{Key: "route", Value: "/x"}}).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 3 {
		t.Errorf("%d of 40 concurrent checks allowed, want exactly the limit, 3", got)
	}
}

// TestSharedLimitOnRedis: two instances of an application, each with its
// own Client of its own envoy-rls, both on one Redis, share one limit
// exactly: what an in-process limiter per instance cannot do.
func TestSharedLimitOnRedis(t *testing.T) {
	r := redistest.Start(t)
	clients := []*client.Client{
		dial(t, serve(t, redisService(t, r.URL(), time.Second), nil), client.WithTimeout(5*time.Second)),
		dial(t, serve(t, redisService(t, r.URL(), time.Second), nil), client.WithTimeout(5*time.Second)),
	}
	allowed := [2]int{}
	for i := range 10 {
		if d := check(t, clients[i%2], 0, user("ann")); d.Unavailable != nil {
			t.Fatalf("check %d: %v", i, d.Unavailable)
		} else if d.Allowed {
			allowed[i%2]++
		}
	}
	if allowed[0]+allowed[1] != 3 || allowed[0] == 0 || allowed[1] == 0 {
		t.Errorf("allowed %v by the two instances, want 3 in all, some by each", allowed)
	}
}

// TestFailureMode: a service that cannot answer is decided by the mode,
// within the timeout: a closed port (UNAVAILABLE), a listener that never
// speaks (DEADLINE_EXCEEDED), a service whose Redis is down and whose
// limits fail with an error (the service's UNAVAILABLE).
func TestFailureMode(t *testing.T) {
	r := redistest.Start(t)
	failing := serve(t, failingService(t, r), nil)
	silent := silentAddr(t)
	cases := []struct {
		name string
		addr func() string
		want codes.Code
	}{
		{"closed port", func() string { return closedAddr(t) }, codes.Unavailable},
		{"silent", func() string { return silent }, codes.DeadlineExceeded},
		{"failing", func() string { return failing }, codes.Unavailable},
	}
	for _, tc := range cases {
		for _, mode := range []client.FailureMode{client.FailOpen, client.FailClosed} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				c := dial(t, tc.addr(), client.WithTimeout(100*time.Millisecond), client.WithFailureMode(mode))
				start := time.Now()
				d := check(t, c, 0, user("ann"))
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("decided after %v, want within the 100 ms timeout (2 s margin)", took)
				}
				if d.Allowed != (mode == client.FailOpen) || d.Code != rlsv3.RateLimitResponse_UNKNOWN || d.Response != nil {
					t.Errorf("%+v, want Allowed %v by the failure mode", d, mode == client.FailOpen)
				}
				if got := status.Code(d.Unavailable); got != tc.want {
					t.Errorf("Unavailable %v (code %v), want %v", d.Unavailable, got, tc.want)
				}
			})
		}
	}
	t.Run("caller's deadline", func(t *testing.T) {
		c := dial(t, silent, client.WithTimeout(time.Minute))
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		d, err := c.Check(ctx, "app", 0, user("ann"))
		if err != nil || !d.Allowed || status.Code(d.Unavailable) != codes.DeadlineExceeded {
			t.Errorf("%+v, %v: want allowed by the failure mode after the caller's deadline", d, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("decided after %v, want at the caller's 100 ms deadline (2 s margin)", took)
		}
	})
}

// TestInvalidArgument: a request the service refuses as invalid is the
// caller's error, not a decision.
func TestInvalidArgument(t *testing.T) {
	c := dial(t, serve(t, memoryService(t), nil))
	long := client.Descriptor{{Key: "user", Value: "ann"}, {Key: "request_id", Value: strings.Repeat("x", 300)}}
	d, err := c.Check(t.Context(), "app", 0, long)
	if !errors.Is(err, client.ErrInvalidRequest) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%+v, %v: want ErrInvalidRequest wrapping INVALID_ARGUMENT", d, err)
	}
	if d.Allowed {
		t.Error("an invalid request was allowed")
	}
}
