package redisstore

import (
	"context"
	"errors"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// A Redis that answers but refuses the client's settings is a
// *RefusedError naming the setting; one that is down is not.
func TestPingRefused(t *testing.T) {
	auth := redistest.StartWith(t, redistest.Options{Password: "s3cret"})
	plain := redistest.Start(t)
	tlsSrv := redistest.StartWith(t, redistest.Options{TLS: true})
	down := redistest.Start(t)
	down.Stop()
	for _, tc := range []struct {
		name string
		o    ClientOptions
		want Setting // 0: an error that is no refusal
	}{
		{"wrong password", ClientOptions{URL: auth.URL(), Password: "wrong"}, Credentials},
		{"no password", ClientOptions{URL: auth.URL()}, Credentials},
		{"a user the server does not have", ClientOptions{URL: plain.URL(), Username: "nobody", Password: "x"}, Credentials},
		{"TLS to a server that wants a password, without TLS", ClientOptions{URL: auth.URL(), TLS: true}, TLS},
		{"no such database", ClientOptions{URL: plain.URL() + "/99"}, Database},
		{"TLS to a plain server", ClientOptions{URL: plain.URL(), TLS: true}, TLS},
		{"plain to a TLS server", ClientOptions{URL: "redis://" + tlsSrv.Addr()}, TLS},
		{"an unknown CA", ClientOptions{URL: tlsSrv.URL()}, TLS},
		{"down", ClientOptions{URL: down.URL()}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Timeout = testTimeout
			s := New(newClient(t, tc.o), Options{})
			t.Cleanup(s.Close)
			err := s.Ping(context.Background())
			var re *RefusedError
			switch {
			case err == nil:
				t.Fatal("Ping: no error")
			case tc.want == 0 && errors.As(err, &re):
				t.Errorf("Ping: %v, want an outage, not a refusal", err)
			case tc.want != 0 && (!errors.As(err, &re) || re.Setting != tc.want):
				t.Errorf("Ping: %v, want a refusal of the %s", err, tc.want)
			}
		})
	}
	// The right settings are no refusal.
	s := New(newClient(t, ClientOptions{URL: auth.URL(), Password: "s3cret", Timeout: testTimeout}), Options{})
	t.Cleanup(s.Close)
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping with the password: %v", err)
	}
}
