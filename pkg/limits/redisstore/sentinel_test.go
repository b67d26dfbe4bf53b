package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestSentinelFailover: through the Sentinels, the store decides on the
// master; when the master dies, calls fail fast (the failure mode's cue)
// instead of hanging, and once the replica is promoted the store decides on
// it, with the state the replica had copied.
func TestSentinelFailover(t *testing.T) {
	sen := redistest.StartSentinel(t)
	c, err := NewClient(ClientOptions{Sentinel: sen.Addrs(), SentinelMaster: redistest.SentinelMaster, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, Options{})
	t.Cleanup(s.Close)
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Hour}
	hit := limits.Hit{Key: "{sentinel}:a", Limit: l, Cost: 1}
	for i := range int64(3) {
		if r := decideOne(t, s, hit); r.Err != nil || r.Remaining != 9-i {
			t.Fatalf("hit %d on the first master: %+v, want remaining %d", i, r, 9-i)
		}
	}
	// The replica has the three hits before the master goes.
	sen.WaitReplicated(t)

	sen.Master.Stop()
	start := time.Now()
	r := decideOne(t, s, hit)
	if r.Err == nil {
		t.Fatalf("with the master down: %+v, want an error", r)
	}
	if took := time.Since(start); took > 10*testTimeout {
		t.Errorf("a call with the master down took %s, want it to fail within the store timeout (%s)", took, testTimeout)
	}

	sen.WaitFailover(t)
	if !eventually(10*time.Second, func() bool { r = decideOne(t, s, hit); return r.Err == nil }) {
		t.Fatalf("10 s after the failover the store still fails: %v", r.Err)
	}
	if r.Remaining != 6 || !r.Allowed {
		t.Errorf("first hit on the promoted replica: %+v, want allowed with remaining 6 (the replica's copy of 3 hits, and this one)", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the failover: %v", err)
	}
}

// TestSentinelPasswords: -redis-password reaches the master, and
// -redis-sentinel-password the Sentinel; without the latter the master
// cannot be found.
func TestSentinelPasswords(t *testing.T) {
	sen := redistest.StartSentinelWith(t, redistest.SentinelOptions{Password: "master-secret", SentinelPassword: "sentinel-secret"})
	hit := limits.Hit{Key: "{sentinel}:auth", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Hour}, Cost: 1}
	for _, tc := range []struct {
		name           string
		sentinelSecret string
		ok             bool
	}{
		{"both passwords", "sentinel-secret", true},
		{"no Sentinel password", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(ClientOptions{Sentinel: sen.Addrs(), SentinelMaster: redistest.SentinelMaster,
				Password: "master-secret", SentinelPassword: tc.sentinelSecret, Timeout: testTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := New(c, Options{})
			defer s.Close()
			r := decideOne(t, s, hit)
			if (r.Err == nil) != tc.ok {
				t.Errorf("got %+v, want success %v", r, tc.ok)
			}
		})
	}
}

// TestSentinelTLS: -redis-tls and -redis-tls-ca reach the Sentinel and the
// master it names, replication over TLS too; the failover works as in
// plaintext.
func TestSentinelTLS(t *testing.T) {
	sen := redistest.StartSentinelWith(t, redistest.SentinelOptions{TLS: true})
	c, err := NewClient(ClientOptions{Sentinel: sen.Addrs(), SentinelMaster: redistest.SentinelMaster,
		TLS: true, TLSCA: sen.CA.File, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, Options{})
	t.Cleanup(s.Close)
	hit := limits.Hit{Key: "{sentinel}:tls", Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: time.Hour}, Cost: 1}
	if r := decideOne(t, s, hit); r.Err != nil || r.Remaining != 9 {
		t.Fatalf("over TLS: %+v, want remaining 9", r)
	}
	sen.WaitReplicated(t)
	sen.Master.Stop()
	sen.WaitFailover(t)
	if !eventually(10*time.Second, func() bool { r := decideOne(t, s, hit); return r.Err == nil && r.Remaining == 8 }) {
		t.Fatal("no decision on the promoted replica over TLS within 10 s, or not from its copy of the state")
	}
}

// eventually polls cond every 20 ms until it holds or bound passes.
func eventually(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
