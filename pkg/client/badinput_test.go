package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// TestBadInput: each mistake of the caller is its own error, found before
// any call reaches the service.
func TestBadInput(t *testing.T) {
	var calls atomic.Int64
	count := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	c := dial(t, serve(t, memoryService(t), nil), client.WithDialOptions(count))
	many := make([]client.Descriptor, 65)
	for i := range many {
		many[i] = user("ann")
	}
	deep := make(client.Descriptor, 33)
	for i := range deep {
		deep[i] = client.Entry{Key: "k", Value: "v"}
	}
	cases := []struct {
		name   string
		domain string
		ds     []client.Descriptor
		want   error
	}{
		{"empty domain", "", []client.Descriptor{user("ann")}, client.ErrNoDomain},
		{"no descriptors", "app", nil, client.ErrNoDescriptors},
		{"65 descriptors", "app", many, client.ErrTooManyDescriptors},
		{"empty descriptor", "app", []client.Descriptor{user("ann"), {}}, client.ErrNoEntries},
		{"33 entries", "app", []client.Descriptor{deep}, client.ErrTooManyEntries},
		{"empty key", "app", []client.Descriptor{{{Key: "", Value: "ann"}}}, client.ErrEmptyKey},
		{"empty value", "app", []client.Descriptor{{{Key: "user", Value: "ann"}, {Key: "route", Value: ""}}}, client.ErrEmptyValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := c.Check(t.Context(), tc.domain, 0, tc.ds...)
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if d.Allowed {
				t.Error("a mistaken request was allowed")
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d calls reached the service, want none", n)
	}
	check(t, c, 0, user("ann"))
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls after a good check, want 1 (the counter counts)", n)
	}
}

// TestBadOptions: Dial refuses a bad option or an empty target; a Client of
// New given one answers every Check with it, and a Client of neither
// ErrNoClient.
func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		opts   []client.Option
		want   error
		words  string
	}{
		{"empty target", "", nil, client.ErrNoTarget, "empty target"},
		{"zero timeout", "127.0.0.1:1", []client.Option{client.WithTimeout(0)}, client.ErrBadOption, "must be positive"},
		{"negative timeout", "127.0.0.1:1", []client.Option{client.WithTimeout(-time.Second)}, client.ErrBadOption, "must be positive"},
		{"nil TLS", "127.0.0.1:1", []client.Option{client.WithTLS((*tls.Config)(nil))}, client.ErrBadOption, "nil config"},
		{"unknown mode", "127.0.0.1:1", []client.Option{client.WithFailureMode(7)}, client.ErrBadOption, "not FailOpen or FailClosed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.Dial(tc.target, tc.opts...)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("Dial: %v, want %v saying %q", err, tc.want, tc.words)
			}
			if c != nil {
				t.Error("Dial returned a client with its error")
			}
		})
	}
	conn, err := grpc.NewClient(closedAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := client.New(conn, client.WithTimeout(0))
	if _, err := c.Check(t.Context(), "app", 0, user("ann")); !errors.Is(err, client.ErrBadOption) {
		t.Errorf("Check of New with a bad option: %v, want ErrBadOption", err)
	}
	for _, c := range []*client.Client{nil, new(client.Client)} {
		if _, err := c.Check(t.Context(), "app", 0, user("ann")); !errors.Is(err, client.ErrNoClient) {
			t.Errorf("Check of %#v: %v, want ErrNoClient", c, err)
		}
	}
}
