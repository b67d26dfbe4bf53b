package redisstore

import (
	"context"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// This file runs NewClient against real servers that require TLS or
// credentials: what -redis-url, -redis-tls, -redis-tls-ca,
// -redis-username and -redis-password promise.

// checkDecides fails the test unless a store on c decides a limit of 1 per
// hour: the first hit allowed, the second refused.
func checkDecides(t *testing.T, c redisClient) {
	t.Helper()
	s := New(c, Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	l := hourly(limits.FixedWindow, 1)
	key := "tls:" + t.Name()
	if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || !r.Allowed {
		t.Fatalf("first hit: %+v, want allowed", r)
	}
	if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || r.Allowed {
		t.Fatalf("second hit: %+v, want refused", r)
	}
}

// checkFails fails the test unless Ping and Decide both fail with an error
// that mentions want (Decide: wantDecide, if set) and does not show secret.
func checkFails(t *testing.T, c redisClient, want, wantDecide, secret string) {
	t.Helper()
	s := New(c, Options{})
	err := s.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Ping: %v, want an error mentioning %q", err, want)
	}
	if wantDecide == "" {
		wantDecide = want
	}
	r := decideOne(t, s, limits.Hit{Key: "tls:fail", Limit: hourly(limits.FixedWindow, 1), Cost: 1})
	if r.Err == nil || !strings.Contains(r.Err.Error(), wantDecide) {
		t.Errorf("Decide: %+v, want an error mentioning %q", r, wantDecide)
	}
	for _, e := range []error{err, r.Err} {
		if secret != "" && e != nil && strings.Contains(e.Error(), secret) {
			t.Errorf("error %q shows the password", e)
		}
	}
}

func TestTLS(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{TLS: true})
	ca := srv.TLS().CA.File

	t.Run("rediss URL with CA", func(t *testing.T) {
		checkDecides(t, newClient(t, ClientOptions{URL: srv.URL(), TLSCA: ca, Timeout: testTimeout}))
	})
	t.Run("redis URL with -redis-tls", func(t *testing.T) {
		checkDecides(t, newClient(t, ClientOptions{URL: "redis://" + srv.Addr(), TLS: true, TLSCA: ca, Timeout: testTimeout}))
	})
	t.Run("wrong CA", func(t *testing.T) {
		other := redistest.NewCA(t).File
		checkFails(t, newClient(t, ClientOptions{URL: srv.URL(), TLSCA: other, Timeout: testTimeout}),
			"certificate signed by unknown authority", "", "")
	})
	t.Run("system roots", func(t *testing.T) {
		checkFails(t, newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout}),
			"certificate signed by unknown authority", "", "")
	})
	t.Run("plaintext to a TLS port", func(t *testing.T) {
		s := New(newClient(t, ClientOptions{URL: "redis://" + srv.Addr(), Timeout: testTimeout}), Options{})
		if err := s.Ping(context.Background()); err == nil {
			t.Error("Ping in plaintext to a TLS-only port succeeded")
		}
	})
}

func TestAuth(t *testing.T) {
	const (
		defaultPass = "default-s3cret"
		alicePass   = "alice-s3cret"
	)
	srv := redistest.StartWith(t, redistest.Options{
		Password: defaultPass,
		Users:    []redistest.User{{Name: "alice", Password: alicePass}},
	})
	for _, tc := range []struct {
		name string
		o    ClientOptions
		want string // "" means it works
		// wantDecide is what a Decide error mentions, if not want.
		wantDecide string
	}{
		{"URL user", ClientOptions{URL: srv.URLWithUser("alice", alicePass)}, "", ""},
		{"URL password alone", ClientOptions{URL: srv.URLWithUser("", defaultPass)}, "", ""},
		{"flags user", ClientOptions{URL: srv.URL(), Username: "alice", Password: alicePass}, "", ""},
		{"flags password alone", ClientOptions{URL: srv.URL(), Password: defaultPass}, "", ""},
		{"URL wins over flags", ClientOptions{URL: srv.URLWithUser("alice", alicePass), Username: "alice", Password: "wrong"}, "", ""},
		{"none", ClientOptions{URL: srv.URL()}, "NOAUTH", ""},
		{"URL wrong password", ClientOptions{URL: srv.URLWithUser("alice", "wrong-pass")}, "WRONGPASS", ""},
		{"flags wrong password", ClientOptions{URL: srv.URL(), Username: "alice", Password: "wrong-pass"}, "WRONGPASS", ""},
		{"unknown user", ClientOptions{URL: srv.URL(), Username: "bob", Password: alicePass}, "WRONGPASS", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Timeout = testTimeout
			c := newClient(t, tc.o)
			if tc.want == "" {
				checkDecides(t, c)
				return
			}
			checkFails(t, c, tc.want, tc.wantDecide, "wrong-pass")
		})
	}
}

// TestTLSAndAuth: both at once, credentials in a rediss:// URL.
func TestTLSAndAuth(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{TLS: true, Users: []redistest.User{{Name: "rls", Password: "rlspass"}}})
	ca := srv.TLS().CA.File
	checkDecides(t, newClient(t, ClientOptions{URL: srv.URLWithUser("rls", "rlspass"), TLSCA: ca, Timeout: testTimeout}))
	checkFails(t, newClient(t, ClientOptions{URL: srv.URLWithUser("rls", "nope-pass"), TLSCA: ca, Timeout: testTimeout}),
		"WRONGPASS", "", "nope-pass")
}

// TestNewClientOnePool: the store's pipelines share the pool of PING
// (redispipe's TestNewClientOnePool), so that the PING at the start opens
// a connection that the first decisions use, over TLS too: once PING has
// connected, a decision within a tight deadline needs no new connection,
// no dial, TLS handshake or AUTH on its path.
func TestNewClientOnePool(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{TLS: true, Password: "p"})
	c := newClient(t, ClientOptions{URL: srv.URLWithUser("", "p"), TLSCA: srv.TLS().CA.File, Timeout: testTimeout, PoolSize: 1})
	s := New(c, Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := decideOne(t, s, limits.Hit{Key: "pool", Limit: hourly(limits.FixedWindow, 10), Cost: 1}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// The server sees the client's one connection, and the one asking.
	info, err := srv.Do("INFO", "clients")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "connected_clients:2\r\n") {
		t.Errorf("after PING and 3 decisions, INFO clients:\n%s\nwant connected_clients:2 (one of the client's, one of INFO's)", info)
	}
}

// A Redis that requires client certificates decides for a client that
// presents one its CA signed, and refuses one without (redispipe's
// TestSkipHostname: a certificate that does not name the address dialled
// passes with TLSSkipHostname alone).
func TestTLSClientCertificate(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{TLS: true, ClientCerts: true})
	files := srv.TLS()
	ca := files.CA.File
	with := ClientOptions{URL: srv.URL(), TLSCA: ca, TLSCert: files.ClientCertFile, TLSKey: files.ClientKeyFile, Timeout: testTimeout}
	checkDecides(t, newClient(t, with))
	s := New(newClient(t, ClientOptions{URL: srv.URL(), TLSCA: ca, Timeout: testTimeout}), Options{})
	if err := s.Ping(context.Background()); err == nil {
		t.Error("Ping without a client certificate succeeded")
	}
	if _, err := NewClient(ClientOptions{URL: "redis://" + srv.Addr(), TLSCert: files.ClientCertFile, TLSKey: files.ClientKeyFile}); err == nil {
		t.Error("a client certificate without TLS: no error")
	}
}
