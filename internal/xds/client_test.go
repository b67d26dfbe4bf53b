package xds_test

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/internal/xds/xdstest"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// These tests run the client against a real go-control-plane ADS server
// on a free port, over mutual TLS 1.3 as Envoy Gateway serves it.

const node = "envoy-ratelimit"

// bound is how long a test waits for what should happen within
// milliseconds.
const bound = 10 * time.Second

// clientTLS is the client's side of m.
func clientTLS(m *xdstest.MTLS) *xds.TLS {
	return &xds.TLS{CertFile: m.ClientCert, KeyFile: m.ClientKey, CAFile: m.CA.File}
}

// applied records what the client applied.
type applied struct {
	mu       sync.Mutex
	versions []string
	last     *config.Config
}

func (a *applied) apply(version string, c *config.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.versions = append(a.versions, version)
	a.last = c
}

func (a *applied) get() ([]string, *config.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.versions...), a.last
}

// run starts a client with o (Server, Apply and TLS filled in when
// empty) and stops it when the test ends.
func run(t *testing.T, o xds.Options) *xds.Client {
	t.Helper()
	c, err := xds.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(bound):
			t.Error("Run did not return within the bound after its context ended")
		}
	})
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func limit(name, domain, key string, perUnit uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key:       key,
		RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: perUnit},
	}}}
}

// requestsPerUnit is the limit of the first descriptor of domain in c.
func requestsPerUnit(c *config.Config, domain string) int64 {
	if c == nil || c.Domains[domain] == nil {
		return -1
	}
	return c.Domains[domain].Descriptors[0].Rules[0].Limit.Requests
}

// ackOf finds the ACK of version: its version_info, a nonce, no error.
func ackOf(version string) func(*discoveryv3.DiscoveryRequest) bool {
	return func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetVersionInfo() == version && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
	}
}

func TestSnapshotsOverMutualTLS(t *testing.T) {
	m := xdstest.NewMTLS(t, "ratelimit")
	srv := xdstest.Start(t, xdstest.Options{TLS: m.ServerTLS(t, m.CA)})
	srv.Set(t, node, "1", limit("api", "api", "path", 5))
	var a applied
	c := run(t, xds.Options{
		Server: srv.Addr, NodeID: node, NodeMetadata: map[string]string{"zone": "a"},
		Headers: map[string]string{"x-token": "secret"},
		TLS:     clientTLS(m), Apply: a.apply, Backoff: xds.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Factor: 2},
	})

	// (1) The first snapshot is applied, then ACKed.
	eventually(t, "snapshot 1 ACKed", func() bool { return srv.Find(ackOf("1")) != nil })
	versions, cfg := a.get()
	if len(versions) != 1 || versions[0] != "1" || requestsPerUnit(cfg, "api") != 5 {
		t.Fatalf("applied: got %v with api at %d, want version 1 with api at 5", versions, requestsPerUnit(cfg, "api"))
	}
	first := srv.Requests()[0]
	if first.GetNode().GetId() != node || first.GetNode().GetMetadata().GetFields()["zone"].GetStringValue() != "a" {
		t.Errorf("node: got %v, want id %s and metadata zone=a", first.GetNode(), node)
	}
	if first.GetTypeUrl() != xds.TypeURL || first.GetVersionInfo() != "" || first.GetResponseNonce() != "" {
		t.Errorf("first request: got %v, want the type, no version and no nonce", first)
	}
	if h := srv.Headers(); len(h) == 0 || strings.Join(h[0].Get("x-token"), ",") != "secret" {
		t.Errorf("stream headers: got %v, want x-token: secret", h)
	}
	if s := c.Stats(); s.Version != "1" || s.Applied != 1 || !s.Connected {
		t.Errorf("stats: got %+v, want version 1, one applied, connected", s)
	}

	// (2) A new version replaces it as a whole: api changes, web appears.
	srv.Set(t, node, "2", limit("api", "api", "path", 7), limit("web", "web", "ip", 9))
	eventually(t, "snapshot 2 ACKed", func() bool { return srv.Find(ackOf("2")) != nil })
	versions, cfg = a.get()
	if len(versions) != 2 || requestsPerUnit(cfg, "api") != 7 || requestsPerUnit(cfg, "web") != 9 {
		t.Fatalf("applied: got %v, api %d, web %d, want versions 1 and 2, api 7, web 9", versions, requestsPerUnit(cfg, "api"), requestsPerUnit(cfg, "web"))
	}

	// (3) A bad limit is NACKed with the validator's message; nothing is
	// applied and the version in force stays.
	bad := limit("web", "web", "ip", 9)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	srv.Set(t, node, "3", limit("api", "api", "path", 1), bad)
	var nack *discoveryv3.DiscoveryRequest
	eventually(t, "snapshot 3 NACKed", func() bool {
		nack = srv.Find(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	if got, want := nack.GetErrorDetail().GetMessage(), "web: descriptors[0].rate_limit: has no unit"; got != want {
		t.Errorf("NACK's error_detail: got %q, want %q", got, want)
	}
	if nack.GetVersionInfo() != "2" {
		t.Errorf("NACK's version_info: got %q, want the version in force, 2", nack.GetVersionInfo())
	}
	versions, cfg = a.get()
	if len(versions) != 2 || requestsPerUnit(cfg, "api") != 7 {
		t.Errorf("after the NACK: got %v with api at %d, want nothing new applied", versions, requestsPerUnit(cfg, "api"))
	}
	if s := c.Stats(); s.Version != "2" || s.Refused != 1 {
		t.Errorf("stats: got %+v, want version 2 in force and one refused", s)
	}

	// The server (go-control-plane's cache, as Envoy Gateway's) sends the
	// bad snapshot again at once; the client refuses it once more with
	// its version, after which the server waits for a new snapshot.
	eventually(t, "the repeat of snapshot 3 NACKed with its own version", func() bool {
		return srv.Find(func(r *discoveryv3.DiscoveryRequest) bool {
			return r.GetErrorDetail() != nil && r.GetVersionInfo() == "3"
		}) != nil
	})

	// A good snapshot after the bad one is applied, and the bad one was
	// not sent over and over in between.
	srv.Set(t, node, "4", limit("api", "api", "path", 2))
	eventually(t, "snapshot 4 ACKed", func() bool { return srv.Find(ackOf("4")) != nil })
	nacks := 0
	for _, r := range srv.Requests() {
		if r.GetErrorDetail() != nil {
			nacks++
		}
	}
	if nacks != 2 {
		t.Errorf("got %d NACKs of snapshot 3, want 2: the first, and one that stops the server resending it", nacks)
	}
	if _, cfg = a.get(); requestsPerUnit(cfg, "api") != 2 || cfg.Domains["web"] != nil {
		t.Errorf("snapshot 4: got api at %d and web %v, want api at 2 alone", requestsPerUnit(cfg, "api"), cfg.Domains["web"])
	}
}

// TestServerDownAtStart: the client keeps trying while the server refuses
// connections, and applies the first snapshot once it serves.
func TestServerDownAtStart(t *testing.T) {
	m := xdstest.NewMTLS(t, "ratelimit")
	srv := xdstest.Start(t, xdstest.Options{TLS: m.ServerTLS(t, m.CA), Down: true})
	srv.Set(t, node, "v1", limit("api", "api", "path", 5))
	var a applied
	c := run(t, xds.Options{Server: srv.Addr, NodeID: node, TLS: clientTLS(m), Apply: a.apply,
		Backoff: xds.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}})
	eventually(t, "three refused attempts", func() bool { return srv.Refused() >= 3 && c.Stats().Failures >= 3 })
	if v, _ := a.get(); len(v) != 0 {
		t.Fatalf("applied %v while the server was down", v)
	}
	srv.Up()
	eventually(t, "the snapshot applied once the server is up", func() bool { v, _ := a.get(); return len(v) == 1 })
}

// TestClientCertificateRefused: a server that refuses the client's
// certificate is retried with backoff, and the failures are logged at
// most once every LogEvery, however many there are.
func TestClientCertificateRefused(t *testing.T) {
	m := xdstest.NewMTLS(t, "ratelimit")
	other := redistest.NewCA(t) // the server trusts only client certificates of another CA
	var mu sync.Mutex
	count := 0
	stc := m.ServerTLS(t, other)
	stc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		count++
		mu.Unlock()
		return nil, nil
	}
	srv := xdstest.Start(t, xdstest.Options{TLS: stc})
	srv.Set(t, node, "1", limit("api", "api", "path", 5))
	core, logs := observer.New(zapcore.WarnLevel)
	var a applied
	start := time.Now()
	c := run(t, xds.Options{Server: srv.Addr, NodeID: node, TLS: clientTLS(m), Apply: a.apply, Logger: zap.New(core),
		Backoff: xds.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Factor: 2, Jitter: true}})
	eventually(t, "ten refused handshakes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return count >= 10
	})
	elapsed := time.Since(start)
	lines := logs.FilterMessageSnippet("cannot reach the xDS server").All()
	if max := 1 + int(elapsed/xds.DefaultLogEvery); len(lines) == 0 || len(lines) > max {
		t.Fatalf("got %d lines about the failures in %v, want 1 to %d", len(lines), elapsed, max)
	}
	// The error is the TLS alert, or the broken connection it left when the
	// client wrote before reading it.
	if err, _ := lines[0].ContextMap()["error"].(string); !strings.Contains(err, "Unavailable") {
		t.Errorf("the line's error: got %q, want the refused connection", err)
	}
	if v, _ := a.get(); len(v) != 0 {
		t.Errorf("applied %v from a server that refuses the client", v)
	}
	if s := c.Stats(); s.Failures < 9 || s.Connected {
		t.Errorf("stats: got %+v, want the failures counted, not connected", s)
	}
}

func TestNewRefuses(t *testing.T) {
	apply := func(string, *config.Config) {}
	for _, tc := range []struct {
		name string
		o    xds.Options
		want string
	}{
		{"no server", xds.Options{Apply: apply}, "xds: no server address"},
		{"a bad backoff", xds.Options{Server: "localhost:1", Apply: apply, Backoff: xds.Backoff{Initial: time.Second, Max: time.Millisecond, Factor: 2}},
			"xds: backoff: Max must be at least Initial"},
		{"a missing CA file", xds.Options{Server: "localhost:1", Apply: apply, TLS: &xds.TLS{CAFile: "/nonexistent/ca.pem"}},
			"xds: TLS: server CA: open /nonexistent/ca.pem: no such file or directory"},
		{"a certificate without its key", xds.Options{Server: "localhost:1", Apply: apply, TLS: &xds.TLS{CertFile: "c.pem"}},
			"xds: TLS: a client certificate needs both its certificate and its key file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := xds.New(tc.o); err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
}

// A requests_per_unit of 0 is a block rule (Envoy Gateway's requests: 0),
// not a missing field: the snapshot is applied and ACKed, not NACKed.
func TestBlockRuleSnapshotApplied(t *testing.T) {
	m := xdstest.NewMTLS(t, "ratelimit")
	srv := xdstest.Start(t, xdstest.Options{TLS: m.ServerTLS(t, m.CA)})
	srv.Set(t, node, "1", limit("api", "api", "path", 0))
	var a applied
	run(t, xds.Options{Server: srv.Addr, NodeID: node, TLS: clientTLS(m), Apply: a.apply,
		Backoff: xds.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Factor: 2}})
	eventually(t, "snapshot 1 ACKed", func() bool { return srv.Find(ackOf("1")) != nil })
	versions, cfg := a.get()
	if len(versions) != 1 || requestsPerUnit(cfg, "api") != 0 || !cfg.Domains["api"].Descriptors[0].Rules[0].Limit.Blocks() {
		t.Errorf("applied: got %v with api at %d, want version 1 with api's block rule", versions, requestsPerUnit(cfg, "api"))
	}
	if nack := srv.Find(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }); nack != nil {
		t.Errorf("got a NACK: %v", nack.GetErrorDetail())
	}
}

// A tree of descriptors deeper than a request's descriptor can reach is
// NACKed with the depth and the path of the first descriptor too deep,
// and nothing of it is applied.
func TestTooDeepSnapshotNACKed(t *testing.T) {
	m := xdstest.NewMTLS(t, "ratelimit")
	srv := xdstest.Start(t, xdstest.Options{TLS: m.ServerTLS(t, m.CA)})
	deep := limit("deep", "deep", "k", 1)
	for range 40 {
		deep.Descriptors = []*rlsconfv3.RateLimitDescriptor{{Key: "k", Descriptors: deep.Descriptors}}
	}
	srv.Set(t, node, "1", deep)
	var a applied
	run(t, xds.Options{Server: srv.Addr, NodeID: node, TLS: clientTLS(m), Apply: a.apply,
		Backoff: xds.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Factor: 2}})
	var nack *discoveryv3.DiscoveryRequest
	eventually(t, "the deep snapshot NACKed", func() bool {
		nack = srv.Find(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	msg := nack.GetErrorDetail().GetMessage()
	path := "descriptors[0]" + strings.Repeat(".descriptors[0]", config.MaxDepth)
	if !strings.HasPrefix(msg, "deep: "+path+" (deep.k.k.") || !strings.Contains(msg, "nested 33 levels deep, deeper than the 32 entries") {
		t.Errorf("NACK's error_detail: got %q, want the path %s and the depth 33", msg, path)
	}
	if versions, _ := a.get(); len(versions) != 0 {
		t.Errorf("applied: got %v, want nothing", versions)
	}
}
