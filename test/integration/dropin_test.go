package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/xds/xdstest"
)

// These tests run the binary as envoyproxy/ratelimit's image runs it
// (/bin/ratelimit): a link named ratelimit, started with nothing but an
// environment, the one Envoy Gateway's Deployment or Istio's sample gives
// it, with limits in a ConfigMap-shaped runtime directory.

// dropInBinary links the test binary as ratelimit in a directory of its
// own, as the image installs it.
func dropInBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Link(binary, path); err != nil {
		if err := os.Symlink(binary, path); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// configMap is a directory laid out as the kubelet mounts a ConfigMap:
// each key a symlink through `..data` into a timestamped directory.
type configMap struct {
	t   *testing.T
	dir string
	gen int
	cur string
}

func newConfigMap(t *testing.T, dir string, files map[string]string) *configMap {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &configMap{t: t, dir: dir}
	c.publish(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// publish updates the ConfigMap as the kubelet does: a new timestamped
// directory, a new `..data` symlink renamed over the old one, the old
// directory removed.
func (c *configMap) publish(files map[string]string) {
	t := c.t
	t.Helper()
	c.gen++
	ts := fmt.Sprintf("..2026_12_01_09_00_%02d.%d", c.gen, 100+c.gen)
	if err := os.Mkdir(filepath.Join(c.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, ts, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if c.cur != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, c.cur)); err != nil {
			t.Fatal(err)
		}
	}
	c.cur = ts
}

// dropIn is a running drop-in, the addresses its "serving" line gave.
type dropIn struct {
	*proc
	grpcAddr, httpAddr string
}

// startDropIn runs the drop-in at path with exactly env (and PATH) and
// waits for its "serving" log line, which needs LOG_LEVEL info or debug.
// The listeners' ports should be 0 in env: the line says which were
// bound. The process is stopped with SIGTERM when the test ends, and must
// exit 0.
func startDropIn(t *testing.T, path string, env []string) *dropIn {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(path)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	s := &dropIn{proc: p}
	t.Cleanup(func() {
		p.terminate(t)
		if !p.wait(exitBound) {
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("ratelimit did not exit within %s of SIGTERM; stderr:\n%s", exitBound, p.stderr.String())
			return
		}
		if code := p.exitCode(); code != 0 || strings.Contains(p.stderr.String(), "DATA RACE") {
			t.Errorf("ratelimit: exit status %d after SIGTERM, want 0 and no race; stderr:\n%s", code, p.stderr.String())
		}
	})
	if !poll(startBound, func() bool {
		s.grpcAddr, s.httpAddr = servingAddrs(p.stderr.String())
		return s.grpcAddr != "" || p.exited()
	}) || s.grpcAddr == "" {
		t.Fatalf("ratelimit: no serving line within %s (exited: %v); stderr:\n%s", startBound, p.exited(), p.stderr.String())
	}
	return s
}

// servingAddrs reads the addresses of the console log's "serving" line,
// as loopback addresses a client can dial; empty before the line.
func servingAddrs(stderr string) (grpcAddr, httpAddr string) {
	for _, line := range strings.Split(stderr, "\n") {
		fields := strings.SplitN(line, "\t", 4)
		if len(fields) < 4 || fields[2] != "serving" {
			continue
		}
		var addrs struct{ GRPC, HTTP string }
		if err := json.Unmarshal([]byte(fields[3]), &addrs); err != nil {
			return "", ""
		}
		return loopback(addrs.GRPC), loopback(addrs.HTTP)
	}
	return "", ""
}

// loopback turns a wildcard listener's address into one to dial; a unix
// socket's path is kept.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// client is a RateLimitService client of addr.
func (s *dropIn) client(t *testing.T, creds credentials.TransportCredentials) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func decideWith(t *testing.T, c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

func (s *dropIn) healthcheck(t *testing.T) (int, string) {
	t.Helper()
	resp, err := httpClient.Get("http://" + s.httpAddr + "/healthcheck")
	if err != nil {
		t.Fatalf("GET /healthcheck: %v", err)
	}
	return readResponse(t, resp)
}

// gatewayLimits are limits as Envoy Gateway's users write them: tokens
// charged after the response (hits_addend), and a plain per-user limit.
func gatewayLimits(perUser int) string {
	return fmt.Sprintf(`domain: eg
descriptors:
  - key: tokens
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: %d}
`, perUser)
}

// envoyGatewayEnv is the env of Envoy Gateway's ratelimit Deployment
// (internal/infrastructure/kubernetes/ratelimit/resource.go), in file
// mode: its xDS variables left out, its gRPC mutual TLS and Prometheus
// kept, the listeners on port 0.
func envoyGatewayEnv(root, redisAddr, cert, key, ca string) []string {
	return []string{
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_IGNOREDOTFILES=true",
		"RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info",
		"USE_STATSD=false",
		"GRPC_SERVER_USE_TLS=true",
		"GRPC_SERVER_TLS_CERT=" + cert,
		"GRPC_SERVER_TLS_KEY=" + key,
		"GRPC_SERVER_TLS_CA_CERT=" + ca,
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr,
		"USE_PROMETHEUS=true",
		"PROMETHEUS_ADDR=127.0.0.1:0",
		"PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0",
	}
}

// Envoy Gateway's Deployment, file mode: /healthcheck answers on PORT, the
// gRPC port takes only clients with a certificate its CA signed, limits
// that name no algorithm are fixed windows that count refused hits (a
// 25-token charge on a limit of 10 refuses the next request), Redis holds
// the counters, and a kubelet swap of the ConfigMap reloads within 2 s.
func TestDropInEnvoyGateway(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	srv := redistest.Start(t)
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "ratelimit")
	clientCert, clientKey := ca.Issue(t, "envoy")
	root := t.TempDir()
	cm := newConfigMap(t, filepath.Join(root, "ratelimit", "config"), map[string]string{"config.yaml": gatewayLimits(5)})

	s := startDropIn(t, bin, envoyGatewayEnv(root, srv.Addr(), cert, key, ca.File))
	if code, body := s.healthcheck(t); code != http.StatusOK {
		t.Fatalf("GET /healthcheck: got %d %q, want 200", code, body)
	}
	mtls := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{redistest.KeyPair(t, clientCert, clientKey)}})
	c := s.client(t, mtls)

	// After-response costs: a peek, 25 tokens on a limit of 10 (refused,
	// and counted), and the next request refused.
	checkResponse(t, decideWith(t, c, request("eg", withHits(desc("tokens", "t1"), 0))), codeOK,
		want{codeOK, limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 10})
	checkResponse(t, decideWith(t, c, request("eg", withHits(desc("tokens", "t1"), 25))), codeOver,
		want{codeOver, limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 0})
	checkResponse(t, decideWith(t, c, request("eg", desc("tokens", "t1"))), codeOver,
		want{codeOver, limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 0})

	// A fixed window: its reset is the end of the clock hour.
	var resp *rlsv3.RateLimitResponse
	var before time.Time
	for range 3 {
		before = time.Now()
		resp = decideWith(t, c, request("eg", desc("user", "alice")))
	}
	checkResponse(t, resp, codeOK, want{codeOK, limit("per-user", 5, rlsv3.RateLimitResponse_RateLimit_HOUR), 2})
	checkHourReset(t, "user=alice", resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(), before)
	if n, err := srv.Do("DBSIZE"); err != nil || n == "0" {
		t.Errorf("Redis DBSIZE: got %q (%v), want the counters there", n, err)
	}

	// Without a client certificate the gRPC port refuses.
	plain := s.client(t, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}))
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	_, err := plain.ShouldRateLimit(ctx, request("eg", desc("user", "bob")))
	cancel()
	if err == nil {
		t.Error("a call without a client certificate: got an answer, want it refused (mutual TLS)")
	}

	// The kubelet swaps the ConfigMap: the new limit within 2 s.
	swapped := time.Now()
	cm.publish(map[string]string{"config.yaml": gatewayLimits(7)})
	if !poll(reloadBound, func() bool {
		r := decideWith(t, c, request("eg", withHits(desc("user", "carol"), 0)))
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 7
	}) {
		t.Fatalf("the swapped ConfigMap (7 per hour) not in force within %s; stderr:\n%s", reloadBound, s.stderr.String())
	}
	t.Logf("reloaded %s after the swap", time.Since(swapped).Round(time.Millisecond))
}

// Envoy Gateway's Deployment as it runs: limits from its xDS server over
// mutual TLS, one certificate for the gRPC server and the xDS client,
// healthy before the first snapshot (FORCE_START_WITHOUT_INITIAL_CONFIG),
// and limits that name no algorithm (none over xDS can) counted as
// envoyproxy/ratelimit counts them.
func TestDropInEnvoyGatewayXDS(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	srv := redistest.Start(t)
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rate-limit")
	egCert, egKey := ca.Issue(t, "envoy-gateway")
	xs := xdstest.Start(t, xdstest.Options{TLS: &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{redistest.KeyPair(t, egCert, egKey)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	}})
	env := envoyGatewayEnv("/data", srv.Addr(), cert, key, ca.File)
	env = append(env,
		"CONFIG_TYPE=GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL="+xs.Addr,
		"CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true",
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT="+cert,
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY="+key,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT="+ca.File,
	)
	s := startDropIn(t, bin, env)
	if code, body := s.healthcheck(t); code != http.StatusOK {
		t.Fatalf("GET /healthcheck before any snapshot: got %d %q, want 200", code, body)
	}
	mtls := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{redistest.KeyPair(t, cert, key)}})
	c := s.client(t, mtls)

	// The serving line names the limits' source: the xDS server.
	if out := s.stderr.String(); !strings.Contains(out, `"config": "xds `+xs.Addr+`"`) {
		t.Errorf("the serving line does not name the xDS server %s as the limits' source; stderr:\n%s", xs.Addr, out)
	}
	// Envoy Gateway's requests: 0 is a block rule, not a NACK.
	xs.Set(t, "envoy-ratelimit", "1", &rlsconfv3.RateLimitConfig{Name: "eg", Domain: "eg", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: "tokens", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 10},
	}, {
		Key: "blocked", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR},
	}}})
	tokens := limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR)
	// Until the snapshot is applied every call is UNAVAILABLE, as
	// envoyproxy/ratelimit answers before its first config.
	if !poll(startBound, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		r, err := c.ShouldRateLimit(ctx, request("eg", withHits(desc("tokens", "t1"), 0)))
		return err == nil && r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 10
	}) {
		t.Fatalf("the snapshot not in force within %s; stderr:\n%s", startBound, s.stderr.String())
	}
	for range 2 {
		checkResponse(t, decideWith(t, c, request("eg", desc("blocked", "b1"))), codeOver,
			want{codeOver, limit("", 0, rlsv3.RateLimitResponse_RateLimit_HOUR), 0})
	}
	checkResponse(t, decideWith(t, c, request("eg", withHits(desc("tokens", "t1"), 25))), codeOver, want{codeOver, tokens, 0})
	checkResponse(t, decideWith(t, c, request("eg", desc("tokens", "t1"))), codeOver, want{codeOver, tokens, 0})
	if xs.Find(func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetVersionInfo() == "1" && r.GetErrorDetail() == nil && r.GetNode().GetId() == "envoy-ratelimit"
	}) == nil {
		t.Errorf("the xDS server got no ACK of version 1 from node envoy-ratelimit; requests: %v", xs.Requests())
	}
}

// checkHourReset checks the reset of an hourly fixed window answered in
// envoyproxy/ratelimit's form, taken just after before: the time to the
// end of the clock hour, in whole seconds, rounded up as it rounds (the
// hour's length less the whole seconds gone).
func checkHourReset(t *testing.T, label string, got time.Duration, before time.Time) {
	t.Helper()
	if before.Truncate(time.Hour) != time.Now().Truncate(time.Hour) {
		t.Logf("%s: an hour boundary passed during the call; the reset not checked", label)
		return
	}
	left := time.Hour - windowElapsed(before, time.Hour)
	lo, hi := left-time.Since(before)-resetSlack, left+time.Second
	if got%time.Second != 0 || got < lo || got > hi {
		t.Errorf("%s: duration_until_reset: got %s, want the %s to the end of the hour in whole seconds (between %s and %s)", label, got, left, lo, hi)
	}
}

// istioLimits are the limits of Istio's sample ConfigMap: one request a
// minute to the product page, a hundred to any other path.
const istioLimits = `domain: ratelimit
descriptors:
  - key: PATH
    value: "/productpage"
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: PATH
    rate_limit:
      unit: minute
      requests_per_unit: 100
`

// Istio's sample Deployment (samples/ratelimit/rate-limit-service.yaml):
// its env, its ConfigMap mounted at RUNTIME_ROOT/ratelimit/config.
func TestDropInIstioSample(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	srv := redistest.Start(t)
	data := t.TempDir() // the sample's /data
	newConfigMap(t, filepath.Join(data, "ratelimit", "config"), map[string]string{"config.yaml": istioLimits})
	s := startDropIn(t, bin, []string{
		"LOG_LEVEL=debug",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + srv.Addr(),
		"USE_STATSD=false",
		"RUNTIME_ROOT=" + data,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_IGNOREDOTFILES=true",
		"RUNTIME_WATCH_ROOT=false",
		"PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0",
	})
	if code, body := s.healthcheck(t); code != http.StatusOK {
		t.Fatalf("GET /healthcheck: got %d %q, want 200", code, body)
	}
	c := s.client(t, insecure.NewCredentials())
	page := limit("", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE)
	checkResponse(t, decideWith(t, c, request("ratelimit", desc("PATH", "/productpage"))), codeOK, want{codeOK, page, 0})
	checkResponse(t, decideWith(t, c, request("ratelimit", desc("PATH", "/productpage"))), codeOver, want{codeOver, page, 0})
	checkResponse(t, decideWith(t, c, request("ratelimit", desc("PATH", "/reviews"))), codeOK,
		want{codeOK, limit("", 100, rlsv3.RateLimitResponse_RateLimit_MINUTE), 99})
	if !strings.Contains(s.stderr.String(), "\tdebug\t") {
		t.Errorf("LOG_LEVEL=debug: no debug line in the log:\n%s", s.stderr.String())
	}
}

// With RUNTIME_WATCH_ROOT=true the whole runtime root is a symlink that
// is swapped for a new version of every file: the new limits within 2 s.
func TestDropInWatchRoot(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	base := t.TempDir()
	version := func(n, perUser int) string {
		dir := filepath.Join(base, fmt.Sprintf("v%d", n))
		writeFile(t, mkdirAll(t, filepath.Join(dir, "ratelimit", "config")), "limits.yaml", gatewayLimits(perUser))
		return dir
	}
	current := filepath.Join(base, "current")
	if err := os.Symlink(version(1, 5), current); err != nil {
		t.Fatal(err)
	}
	s := startDropIn(t, bin, []string{
		"RUNTIME_ROOT=" + current, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=true",
		"LOG_LEVEL=info", "USE_STATSD=false", "RLS_REDIS_URL=", // the embedded store
		"PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0",
	})
	c := s.client(t, insecure.NewCredentials())
	perUser := func() uint32 {
		r := decideWith(t, c, request("eg", withHits(desc("user", "u"), 0)))
		return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	if got := perUser(); got != 5 {
		t.Fatalf("per-user limit: got %d, want 5", got)
	}
	next := version(2, 9)
	tmp := filepath.Join(base, "current.tmp")
	if err := os.Symlink(next, tmp); err != nil {
		t.Fatal(err)
	}
	swapped := time.Now()
	if err := os.Rename(tmp, current); err != nil {
		t.Fatal(err)
	}
	if !poll(reloadBound, func() bool { return perUser() == 9 }) {
		t.Fatalf("the swapped root (9 per hour) not in force within %s; stderr:\n%s", reloadBound, s.stderr.String())
	}
	t.Logf("reloaded %s after the swap", time.Since(swapped).Round(time.Millisecond))
}

func mkdirAll(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// GRPC_UDS: the gRPC service on a unix socket instead of GRPC_PORT.
func TestDropInUnixSocket(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	root := t.TempDir()
	newConfigMap(t, filepath.Join(root, "ratelimit", "config"), map[string]string{"config.yaml": istioLimits})
	sock := filepath.Join(t.TempDir(), "ratelimit.sock")
	s := startDropIn(t, bin, []string{
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true",
		"LOG_LEVEL=info", "USE_STATSD=false", "RLS_REDIS_URL=",
		"GRPC_UDS=" + sock, "PORT=0", "DEBUG_PORT=0",
	})
	if s.grpcAddr != sock {
		t.Fatalf("gRPC address: got %q, want the socket %s", s.grpcAddr, sock)
	}
	s.grpcAddr = "unix://" + sock
	c := s.client(t, insecure.NewCredentials())
	checkResponse(t, decideWith(t, c, request("ratelimit", desc("PATH", "/productpage"))), codeOK,
		want{codeOK, limit("", 1, rlsv3.RateLimitResponse_RateLimit_MINUTE), 0})
}

// A variable envoy-rls does not honour, and a malformed one, stop the
// start with one line naming the variable, and a non-zero exit.
func TestDropInRefusesVariables(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	root := t.TempDir()
	newConfigMap(t, filepath.Join(root, "ratelimit", "config"), map[string]string{"config.yaml": istioLimits})
	base := []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true",
		"USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:6379", "PORT=0", "GRPC_PORT=0", "DEBUG_PORT=0"}
	for _, c := range []struct{ extra, line string }{
		{"BACKEND_TYPE=memcache", `ratelimit: BACKEND_TYPE="memcache": envoy-rls counts in Redis (or its embedded store), not in memcache`},
		{"REDIS_PERSECOND=true", `ratelimit: REDIS_PERSECOND="true": envoy-rls counts every limit in one Redis; point REDIS_URL at the Redis to use`},
		{"REDIS_TYPE=replicated", `ratelimit: REDIS_TYPE="replicated": want single, sentinel or cluster (any case)`},
		{"GRPC_PORT=grpc", `ratelimit: GRPC_PORT="grpc": want a port number, 0 to 65535`},
	} {
		// The variable last: of two values, the last is the one set.
		cmd := exec.Command(bin)
		cmd.Env = append(append([]string{"PATH=" + os.Getenv("PATH")}, base...), c.extra)
		var stderr buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() //nolint:errcheck // the exit status is read below
		select {
		case <-done:
		case <-time.After(exitBound):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s: still running after %s, want the start stopped; stderr:\n%s", c.extra, exitBound, stderr.String())
			continue
		}
		if code, stderr := cmd.ProcessState.ExitCode(), stderr.String(); code == 0 || stderr != c.line+"\n" {
			t.Errorf("%s: got exit %d and stderr %q, want a non-zero exit and the one line %q", c.extra, code, stderr, c.line)
		}
	}
}

// RLS_ variables win over envoyproxy/ratelimit's: envoy-rls's own rule
// (sliding windows, refused hits not counted) and its embedded store.
func TestDropInTwinsWin(t *testing.T) {
	t.Parallel()
	bin := dropInBinary(t)
	root := t.TempDir()
	newConfigMap(t, filepath.Join(root, "ratelimit", "config"), map[string]string{"config.yaml": gatewayLimits(5)})
	s := startDropIn(t, bin, []string{
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=error", "USE_STATSD=false", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:1",
		"PORT=8080", "GRPC_PORT=0", "DEBUG_PORT=0",
		"RLS_LOG_LEVEL=info", "RLS_DEFAULT_ALGORITHM=sliding_window", "RLS_COUNT_REFUSED=false",
		"RLS_REDIS_URL=", "RLS_HTTP_ADDR=127.0.0.1:0",
	})
	resp, err := httpClient.Get("http://" + s.httpAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := readResponse(t, resp); code != http.StatusOK || !strings.Contains(body, "store: embedded") {
		t.Errorf("GET /healthz: got %d %q, want 200 and the embedded store (RLS_REDIS_URL wins over REDIS_URL)", code, body)
	}
	c := s.client(t, insecure.NewCredentials())
	checkResponse(t, decideWith(t, c, request("eg", withHits(desc("tokens", "t1"), 25))), codeOver,
		want{codeOver, limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 10})
	// The refused 25 did not count: the next request is allowed.
	checkResponse(t, decideWith(t, c, request("eg", desc("tokens", "t1"))), codeOK,
		want{codeOK, limit("", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 9})
}
