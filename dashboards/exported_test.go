package dashboards

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// Bounds, wide: the machine may be busy with other tests.
const (
	startBound = 15 * time.Second // a service's start, until it answers HTTP
	eventBound = 10 * time.Second // an event driven, until the scrape shows it
	callBound  = 5 * time.Second  // one call
	exitBound  = 15 * time.Second // the exit after SIGTERM (the drain's bound and slack)
)

// binary is the envoy-rls executable TestMain builds from this tree.
var binary string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "envoy-rls-dashboards-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "envoy-rls")
	// The service is the module in the parent directory. Without the race
	// detector, which test/integration's binary has: this test is about
	// names, and a race binary takes several times as long to link.
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/envoy-rls")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/envoy-rls in ..: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Every metric each dashboard names is exported by a running envoy-rls,
// driven until every family it names has series: envoy-rls.json against
// the service's /metrics with a Redis and with a Redis Cluster,
// envoy-ratelimit.json against the drop-in's Prometheus sink
// (USE_PROMETHEUS), as Envoy Gateway runs it. A family renamed or
// removed fails here.
func TestDashboardMetricsExported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		board string
		runs  map[string]func(t *testing.T) map[string]bool
	}{
		{nativeBoard, map[string]func(*testing.T) map[string]bool{"redis": nativeRedis, "cluster": nativeCluster}},
		{ratelimitBoard, map[string]func(*testing.T) map[string]bool{"dropin": dropIn, "dropin-shadow": dropInShadow}},
	} {
		t.Run(c.board, func(t *testing.T) {
			t.Parallel()
			b := loadBoard(t, c.board)
			want := boardMetrics(t, &b)
			var mu sync.Mutex
			exported := map[string]bool{}
			t.Run("runs", func(t *testing.T) {
				for name, run := range c.runs {
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						names := run(t)
						mu.Lock()
						defer mu.Unlock()
						maps.Copy(exported, names)
					})
				}
			})
			if t.Failed() {
				return
			}
			missing := 0
			for _, name := range slices.Sorted(maps.Keys(want)) {
				if !exported[name] {
					t.Errorf("%s: %s is not exported by envoy-rls", want[name], name)
					missing++
				}
			}
			if missing > 0 {
				t.Logf("exported: %s", strings.Join(slices.Sorted(maps.Keys(exported)), " "))
			}
		})
	}
}

// shopLimits are the limits the runs decide against: a plain limit of 2
// a minute per user, a limit of 2 a minute per plan with a candidate of 1,
// and a shadow_mode limit on a nested descriptor.
const shopLimits = `domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 2}
  - key: plan
    rate_limit: {name: per-plan, unit: minute, requests_per_unit: 2, candidate: {unit: minute, requests_per_unit: 1}}
  - key: path
    value: /a
    descriptors:
      - key: method
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 1}
`

// nativeRedis runs the service on a single Redis, with statsd, tracing
// and the admin endpoints on (their endpoints down: only the families
// matter), and drives every family that appears only after an event:
// decisions (allowed and refused), a candidate's (would refuse), calls,
// a refused connection, an admin call without its token, and store errors
// with local fallback while Redis is paused.
func nativeRedis(t *testing.T) map[string]bool {
	redis := redistest.Start(t)
	token := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(token, []byte("dashboards-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startNative(t, "-redis-url", redis.URL(), "-failure-mode", "local", "-grpc-max-connections", "1",
		"-statsd-addr", freeAddr(t), "-tracing", "-admin-token-file", token)
	waitFor(t, s.metricsURL, "rls_admin_requests_total", func() {
		if resp, err := http.Get(strings.TrimSuffix(s.metricsURL, "/metrics") + "/top"); err == nil {
			resp.Body.Close()
		}
	})
	c := s.client(t)
	for range 3 {
		decide(t, c, "shop", "user", "alice")
		decide(t, c, "shop", "plan", "pro")
	}
	// The client holds the one connection the bound allows: another is
	// refused.
	waitFor(t, s.metricsURL, "rls_refused_total", func() {
		if conn, err := net.DialTimeout("tcp", s.grpcAddr, callBound); err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(callBound))
			_, _ = io.Copy(io.Discard, conn)
			conn.Close()
		}
	})
	redis.Pause()
	defer redis.Resume()
	waitFor(t, s.metricsURL, "rls_store_errors_total", func() { decide(t, c, "shop", "user", "bob") })
	return scrape(t, s.metricsURL)
}

// nativeCluster runs the service on a Redis Cluster of one master, whose
// masters' families a single Redis does not have.
func nativeCluster(t *testing.T) map[string]bool {
	cluster := redistest.StartCluster(t, 1)
	s := startNative(t, "-redis-cluster", cluster.Addrs()[0])
	decide(t, s.client(t), "shop", "user", "alice")
	return scrape(t, s.metricsURL)
}

// dropIn runs the service as ratelimit with Envoy Gateway's stats
// settings, its mapper included (envoy-rls's built-in one without the
// response time's scale, which is all Envoy Gateway's changes), and drives
// every family of envoyproxy/ratelimit's: hits within, near and over a
// limit, shadow mode, an invalid request, a refused reload, and a Redis
// error under failure mode error.
func dropIn(t *testing.T) map[string]bool {
	builtin, err := os.ReadFile("../internal/metrics/ratelimit_mapper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gateway := strings.Replace(string(builtin), "    scale: 0.001\n", "", 1)
	if gateway == string(builtin) {
		t.Fatal("the built-in mapper has no line `    scale: 0.001` to take out")
	}
	mapper := filepath.Join(t.TempDir(), "mapper.yaml")
	if err := os.WriteFile(mapper, []byte(gateway), 0o644); err != nil {
		t.Fatal(err)
	}
	redis := redistest.Start(t)
	s, configDir := startDropIn(t, redis.Addr(), "RLS_FAILURE_MODE=error", "PROMETHEUS_MAPPER_YAML="+mapper)
	c := s.client(t)
	for range 3 {
		decide(t, c, "shop", "user", "alice")
		decide(t, c, "shop", "path", "/a", "method", "GET")
	}
	waitFor(t, s.metricsURL, "ratelimit_service_should_rate_limit_error", func() {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		_, _ = c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{}) // no domain: invalid
	})
	if err := os.WriteFile(filepath.Join(configDir, "broken.yaml"), []byte("domain: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s.metricsURL, "ratelimit_service_config_load_error", func() {})
	redis.Pause()
	defer redis.Resume()
	waitFor(t, s.metricsURL, `ratelimit_service_should_rate_limit_error{err_type="redis_error"}`, func() {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		_, _ = c.ShouldRateLimit(ctx, request("shop", "user", "carol"))
	})
	return scrape(t, s.metricsURL)
}

// dropInShadow runs the drop-in with SHADOW_MODE=true, which alone counts
// requests let through in the service-wide shadow mode, and the built-in
// mapper.
func dropInShadow(t *testing.T) map[string]bool {
	redis := redistest.Start(t)
	s, _ := startDropIn(t, redis.Addr(), "SHADOW_MODE=true")
	c := s.client(t)
	waitFor(t, s.metricsURL, "ratelimit_service_global_shadow_mode", func() { decide(t, c, "shop", "user", "alice") })
	return scrape(t, s.metricsURL)
}

// service is a running envoy-rls.
type service struct {
	grpcAddr   string
	metricsURL string
}

// startNative starts the binary on the limits with free loopback ports
// and the flags given, and waits until /metrics answers.
func startNative(t *testing.T, flags ...string) *service {
	t.Helper()
	config := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(config, []byte(shopLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, binary, func(addrs []string) ([]string, []string, *service) {
		args := append([]string{"-config", config, "-grpc-addr", addrs[0], "-http-addr", addrs[1],
			"-debug-addr", "", "-log-format", "console"}, flags...)
		return args, nil, &service{grpcAddr: addrs[0], metricsURL: "http://" + addrs[1] + "/metrics"}
	})
}

// startDropIn starts the binary as ratelimit, as Envoy Gateway's
// Deployment runs it (its runtime directory, USE_STATSD=false,
// USE_PROMETHEUS=true), on a Redis, with the extra environment given, and
// returns it and its config directory.
func startDropIn(t *testing.T, redisAddr string, extra ...string) (*service, string) {
	t.Helper()
	root := t.TempDir()
	configDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "config.yaml"), []byte(shopLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(binary, link); err != nil {
		t.Fatal(err)
	}
	s := start(t, link, func(addrs []string) ([]string, []string, *service) {
		env := append([]string{
			"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true",
			"RUNTIME_WATCH_ROOT=false", "LOG_LEVEL=info", "USE_STATSD=false", "USE_PROMETHEUS=true",
			"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
			"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(addrs[0]), "HOST=127.0.0.1", "PORT=" + port(addrs[1]),
			"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(addrs[2]), "PROMETHEUS_ADDR=" + addrs[3],
		}, extra...)
		return nil, env, &service{grpcAddr: addrs[0], metricsURL: "http://" + addrs[3] + "/metrics"}
	})
	return s, configDir
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// start runs path with the arguments and environment launch gives for
// four free loopback addresses (the environment has only PATH besides),
// waits until its metrics answer, and stops it with SIGTERM when the test
// ends, failing the test unless it exits 0. A port taken between picking
// and binding is retried with new ones.
func start(t *testing.T, path string, launch func(addrs []string) (args, env []string, s *service)) *service {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)}
		args, env, s := launch(addrs)
		p := startProc(t, path, args, append([]string{"PATH=" + os.Getenv("PATH")}, env...))
		err := waitServing(p, s.metricsURL)
		if err == nil {
			t.Cleanup(func() { p.stop(t) })
			return s
		}
		p.kill()
		if attempt < 3 && strings.Contains(p.output(), "address already in use") {
			continue
		}
		t.Fatalf("%s %s: %v", path, strings.Join(args, " "), err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is one run of the binary, its output written to a file.
type proc struct {
	cmd  *exec.Cmd
	out  string        // the file of its stdout and stderr
	done chan struct{} // closed once it has exited
}

func startProc(t *testing.T, path string, args, env []string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(path, args...), out: filepath.Join(t.TempDir(), "output"), done: make(chan struct{})}
	f, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own copy
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p
}

// output is what the process has written so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM and fails the test unless the process exits 0 in
// time.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d after SIGTERM, want 0; output:\n%s", code, p.output())
		}
	case <-time.After(exitBound):
		p.kill()
		t.Errorf("no exit within %s of SIGTERM; output:\n%s", exitBound, p.output())
	}
}

// waitServing polls url until it answers 200, the process exits, or
// startBound passes.
func waitServing(p *proc, url string) error {
	deadline := time.Now().Add(startBound)
	for {
		resp, err := httpClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("exited before serving; output:\n%s", p.output())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no 200 within %s (last error: %v); output:\n%s", url, startBound, err, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: callBound}

// scrapeText is the text /metrics answered.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, error %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// scrape is the name of every series url exports: the names a query
// selects (a histogram's _bucket, _sum and _count), of families that
// have a series.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(scrapeText(t, url)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// waitFor calls drive, then scrapes url, until a line of the scrape
// starts with series, failing the test after eventBound.
func waitFor(t *testing.T, url, series string, drive func()) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for {
		drive()
		for line := range strings.Lines(scrapeText(t, url)) {
			if strings.HasPrefix(line, series) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no series %s within %s", url, series, eventBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client is a RateLimitService client of the service, closed when the
// test ends.
func (s *service) client(t *testing.T) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// request is a RateLimitRequest of one descriptor of key, value pairs.
func request(domain string, kv ...string) *rlsv3.RateLimitRequest {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
}

// decide calls ShouldRateLimit, failing the test on an error.
func decide(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, kv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	if _, err := c.ShouldRateLimit(ctx, request(domain, kv...)); err != nil {
		t.Fatalf("ShouldRateLimit(%s %v): %v", domain, kv, err)
	}
}
