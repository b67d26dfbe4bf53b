package server

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/xds/xdstest"
)

// These tests run the server in this process with its limits from a real
// go-control-plane ADS server on a free port, over mutual TLS 1.3 as
// Envoy Gateway serves them, and drive it over real gRPC and HTTP.

const xdsNode = "envoy-ratelimit"

// xdsMTLS is the CA, the server's TLS and the client's flags of one test.
type xdsMTLS struct{ *xdstest.MTLS }

func newXDSMTLS(t *testing.T) *xdsMTLS { return &xdsMTLS{xdstest.NewMTLS(t, "envoy-ratelimit")} }

func (m *xdsMTLS) serverTLS(t *testing.T) *tls.Config { return m.ServerTLS(t, m.CA) }

// flags are the server's flags to reach srv with the client certificate.
func (m *xdsMTLS) flags(srv *xdstest.Server) []string {
	return []string{"-xds-server", srv.Addr, "-xds-node-id", xdsNode, "-xds-tls",
		"-xds-tls-cert", m.ClientCert, "-xds-tls-key", m.ClientKey, "-xds-tls-ca", m.CA.File,
		"-xds-retry-initial", "10ms", "-xds-retry-max", "50ms"}
}

// hourly is a RateLimitConfig of domain test: n requests an hour per value
// of key.
func hourly(key string, n uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: "test", Domain: "test", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key:       key,
		RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n},
	}}}
}

// xdsProcess is a server in this process and a gRPC connection to it.
type xdsProcess struct {
	*inProcess
	conn *grpc.ClientConn
}

// startXDSServer runs the server as serve does, from the flags through
// the wait for the first snapshot, and stops it when the test ends. It
// returns once the server listens.
func startXDSServer(t *testing.T, args ...string) *xdsProcess {
	t.Helper()
	return startXDSServerLogging(t, zap.NewNop(), args...)
}

// startXDSServerLogging is startXDSServer with the server's log to log.
func startXDSServerLogging(t *testing.T, log *zap.Logger, args ...string) *xdsProcess {
	t.Helper()
	base := []string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-debug-addr", "", "-shutdown-timeout", "5s"}
	o, err := parseFlags(append(base, args...), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(o, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !src.ready(ctx) {
		t.Fatal("ready ended without its context ending")
	}
	ls, err := listen(o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	s := &xdsProcess{inProcess: &inProcess{grpcAddr: ls.grpc.Addr().String(), httpAddr: ls.http.Addr().String()}}
	s.conn = grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	serveLoggingUntilCleanup(t, ctx, cancel, o, src, ls, log)
	return s
}

// decide asks the server about k=value in domain test.
func (s *xdsProcess) decide(t *testing.T, key, value string) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(s.conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "test",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}},
	})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// limitOf is the requests_per_unit the server reports for key=value, 0
// when no limit matches or no config has arrived yet (UNAVAILABLE).
func (s *xdsProcess) limitOf(t *testing.T, key, value string) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(s.conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "test",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}},
	})
	switch {
	case status.Code(err) == codes.Unavailable:
		return 0
	case err != nil:
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

func (s *xdsProcess) metric(t *testing.T, line string) bool {
	t.Helper()
	_, body := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", "")
	return strings.Contains(body, line+"\n")
}

func (s *xdsProcess) grpcHealth(t *testing.T) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := healthpb.NewHealthClient(s.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	return resp.GetStatus()
}

// TestXDSLimits: the service decides by the snapshot, a new version
// replaces it, and a bad one is NACKed while the old one keeps deciding.
func TestXDSLimits(t *testing.T) {
	m := newXDSMTLS(t)
	srv := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t)})
	srv.Set(t, xdsNode, "1", hourly("k", 1))
	s := startXDSServer(t, m.flags(srv)...)

	// (1) It serves with the first snapshot's limits: one an hour.
	if got := s.decide(t, "k", "a").GetOverallCode(); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first hit: got %v, want OK", got)
	}
	if got := s.decide(t, "k", "a").GetOverallCode(); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second hit: got %v, want OVER_LIMIT by the snapshot's limit", got)
	}
	if code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/rlconfig", ""); code != 200 || !strings.Contains(body, "test") {
		t.Errorf("/rlconfig: got %d %q, want the snapshot's limits", code, body)
	}

	// (2) A new version replaces it as a whole.
	srv.Set(t, xdsNode, "2", hourly("other", 3))
	eventually(t, "version 2 deciding", func() bool { return s.limitOf(t, "other", "x") == 3 })
	if got := s.limitOf(t, "k", "a"); got != 0 {
		t.Errorf("k after version 2: got a limit of %d, want none (the snapshot replaces the config)", got)
	}
	eventually(t, "the metrics of version 2", func() bool { return s.metric(t, `rls_xds_config_info{version="2"} 1`) })

	// (3) A bad limit is NACKed, and version 2 keeps deciding.
	bad := hourly("other", 9)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	srv.Set(t, xdsNode, "3", bad)
	var nack *discoveryv3.DiscoveryRequest
	eventually(t, "version 3 NACKed", func() bool {
		nack = srv.Find(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	if got, want := nack.GetErrorDetail().GetMessage(), "test: descriptors[0].rate_limit: has no unit"; got != want {
		t.Errorf("NACK: got %q, want %q", got, want)
	}
	if got := s.limitOf(t, "other", "y"); got != 3 {
		t.Errorf("after the NACK: got a limit of %d, want version 2's 3", got)
	}
	eventually(t, "the refusal counted", func() bool {
		return s.metric(t, "rls_xds_snapshots_refused_total 1") && s.metric(t, `rls_config_reloads_total{result="failure"} 1`) &&
			s.metric(t, `rls_xds_config_info{version="2"} 1`)
	})
}

// TestXDSForceStart: with the server down at start, -xds-force-start
// serves at once, healthy, answering UNAVAILABLE, and takes the first snapshot
// once the server comes up.
func TestXDSForceStart(t *testing.T) {
	m := newXDSMTLS(t)
	srv := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t), Down: true})
	srv.Set(t, xdsNode, "1", hourly("k", 1))
	s := startXDSServer(t, append(m.flags(srv), "-xds-force-start")...)

	if code, _ := httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", ""); code != 200 {
		t.Errorf("/healthz with no snapshot yet: got %d, want 200", code)
	}
	if got := s.grpcHealth(t); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health with no snapshot yet: got %v, want SERVING", got)
	}
	// No config yet: every call is UNAVAILABLE, so that Envoy's own failure
	// mode decides, as envoyproxy/ratelimit leaves it to.
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	_, err := rlsv3.NewRateLimitServiceClient(s.conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "test",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "a"}}}}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no rate limit configuration loaded") {
		t.Fatalf("with no snapshot: %v, want UNAVAILABLE, no rate limit configuration loaded", err)
	}
	eventually(t, "attempts refused while down", func() bool { return srv.Refused() >= 2 })
	srv.Up()
	eventually(t, "the first snapshot deciding", func() bool { return s.limitOf(t, "k", "b") == 1 })
}

// TestXDSHealthyNeedsConfig: with -xds-healthy-needs-config the service
// serves before the first snapshot but reports not serving until one
// with a domain is in force, and again while an empty one is.
func TestXDSHealthyNeedsConfig(t *testing.T) {
	m := newXDSMTLS(t)
	srv := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t), Down: true})
	srv.Set(t, xdsNode, "1", hourly("k", 1))
	s := startXDSServer(t, append(m.flags(srv), "-xds-force-start", "-xds-healthy-needs-config")...)

	if code, _ := httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", ""); code != 503 {
		t.Errorf("/healthz with no snapshot: got %d, want 503", code)
	}
	if got := s.grpcHealth(t); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health with no snapshot: got %v, want NOT_SERVING", got)
	}
	srv.Up()
	eventually(t, "healthy once the snapshot is in force", func() bool {
		code, _ := httpDo(t, "GET", "http://"+s.httpAddr+"/healthcheck", "")
		return code == 200 && s.grpcHealth(t) == healthpb.HealthCheckResponse_SERVING
	})
	srv.Set(t, xdsNode, "2")
	eventually(t, "not serving with an empty snapshot in force", func() bool {
		code, _ := httpDo(t, "GET", "http://"+s.httpAddr+"/healthz", "")
		return code == 503 && s.grpcHealth(t) == healthpb.HealthCheckResponse_NOT_SERVING
	})
}

// TestXDSWaitsForTheFirstSnapshot: without -xds-force-start the start
// waits, before the listeners open, until a snapshot is applied; a NACKed
// one does not end the wait.
func TestXDSWaitsForTheFirstSnapshot(t *testing.T) {
	m := newXDSMTLS(t)
	srv := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t), Down: true})
	bad := hourly("k", 1)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	srv.Set(t, xdsNode, "1", bad)
	o, err := parseFlags(m.flags(srv), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(o, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	ready := make(chan bool, 1)
	go func() { ready <- src.ready(context.Background()) }()

	eventually(t, "attempts refused while down", func() bool { return srv.Refused() >= 2 })
	srv.Up()
	eventually(t, "the bad snapshot NACKed", func() bool {
		return srv.Find(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil }) != nil
	})
	select {
	case <-ready:
		t.Fatal("the start went on with no snapshot applied")
	default:
	}
	srv.Set(t, xdsNode, "2", hourly("k", 4))
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("ready: got false, want the snapshot")
		}
	case <-time.After(callBound):
		t.Fatal("the start still waits after a snapshot was applied")
	}
	if d := src.config().Domains["test"]; d == nil || d.Descriptors[0].Rules[0].Limit.Requests != 4 {
		t.Errorf("the config the service starts with: got %v, want version 2's", src.config().Domains)
	}

	// A stop before any snapshot ends the wait.
	srv2 := xdstest.Start(t, xdstest.Options{TLS: m.serverTLS(t), Down: true})
	o2, err := parseFlags(m.flags(srv2), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	src2, err := openSource(o2, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if src2.ready(ctx) {
		t.Error("ready after its context ended: got true, want false")
	}
}

func TestXDSFlags(t *testing.T) {
	o, err := parseFlags([]string{"-xds-server", "eg:18001", "-xds-node-metadata", "zone=a, rack:r1", "-xds-tls"},
		env(map[string]string{"RLS_XDS_HEADERS": "authorization:Bearer t=1,x-a=b", "RLS_XDS_RETRY_INITIAL": "10s"}))
	if err != nil {
		t.Fatal(err)
	}
	x := o.xds
	if x.server != "eg:18001" || x.nodeID != "default" || !x.tls || x.retryInitial != 10*time.Second || x.retryMax != time.Minute {
		t.Errorf("got %+v", x)
	}
	if x.nodeMetadata["zone"] != "a" || x.nodeMetadata["rack"] != "r1" || len(x.nodeMetadata) != 2 {
		t.Errorf("-xds-node-metadata: got %v, want zone=a and rack=r1", x.nodeMetadata)
	}
	if x.headers["authorization"] != "Bearer t=1" || x.headers["x-a"] != "b" {
		t.Errorf("RLS_XDS_HEADERS: got %v, want the key to end at the first : or =", x.headers)
	}
	co := x.clientOptions(o.loadOptions())
	if co.TLS == nil || co.TLS.CertFile != "" || co.Backoff.Initial != 10*time.Second || !co.Backoff.Jitter {
		t.Errorf("client options: got %+v", co)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-xds-force-start"}, nil, "-xds-force-start: needs -xds-server, the xDS server to take the limits from"},
		{nil, map[string]string{"RLS_XDS_TLS": "true", "RLS_XDS_NODE_ID": "x"}, "-xds-node-id, -xds-tls: needs -xds-server"},
		{[]string{"-xds-server", "a:1", "-config", "x.yaml"}, nil, "-config and -xds-server are both set"},
		{[]string{"-xds-server", "a:1", "-xds-tls", "-xds-tls-cert", "c.pem"}, nil, "-xds-tls-cert and -xds-tls-key go together"},
		{[]string{"-xds-server", "a:1", "-xds-tls-ca", "ca.pem"}, nil, "-xds-tls-cert, -xds-tls-key, -xds-tls-ca and -xds-tls-server-name need -xds-tls"},
		{[]string{"-xds-server", "a:1", "-xds-retry-initial", "0s"}, nil, "-xds-retry-initial must be positive"},
		{[]string{"-xds-server", "a:1", "-xds-retry-max", "10ms"}, nil, "-xds-retry-max must be at least -xds-retry-initial"},
		{[]string{"-xds-server", "a:1", "-xds-retry-factor", "0"}, nil, "-xds-retry-factor must be a positive number"},
		{[]string{"-xds-server", "a:1", "-xds-node-metadata", "zone"}, nil, `-xds-node-metadata "zone": want comma-separated key=value pairs, such as a=1,b=2`},
		{[]string{"-xds-server", "a:1"}, map[string]string{"RLS_XDS_HEADERS": "=v"}, `RLS_XDS_HEADERS="=v": want comma-separated key=value pairs`},
	} {
		if _, err := parseFlags(tc.args, env(tc.env)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want %s", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestXDSBadTLSFileFailsTheStart(t *testing.T) {
	o, err := parseFlags([]string{"-xds-server", "127.0.0.1:1", "-xds-tls", "-xds-tls-ca", filepath.Join(t.TempDir(), "missing.pem")}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openSource(o, zap.NewNop(), nil); err == nil || !strings.Contains(err.Error(), "server CA") {
		t.Errorf("got %v, want the missing CA named", err)
	}
}
