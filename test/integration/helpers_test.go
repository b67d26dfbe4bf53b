package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// Bounds. They are generous: the binary runs with the race detector, on
// machines that may be busy with other tests.
const (
	// startBound is how long a starting service may take to answer gRPC
	// health with SERVING.
	startBound = 10 * time.Second
	// exitBound is how long the service may take to exit after SIGTERM: the
	// binary's drain bound (-shutdown-timeout, 10 s) and some slack.
	exitBound = 15 * time.Second
	// callBound is the deadline of one gRPC or HTTP call.
	callBound = 5 * time.Second
	// reloadBound is how soon a config change must take effect
	// (interface.md, "Reload").
	reloadBound = 2 * time.Second
	// resetSlack is the rounding allowed on a duration_until_reset, on top
	// of the time the call itself took.
	resetSlack = 250 * time.Millisecond
)

// store is one way of running the service: the flags that select a store,
// after starting whatever the store needs.
type store struct {
	name string
	// flags starts the store's dependencies for t and returns the flags
	// that select it.
	flags func(t *testing.T) []string
	// health is what /healthz says about a reachable store.
	health string
}

// stores are the setups every behavioural test runs against.
var stores = []store{
	{name: "embedded", flags: func(*testing.T) []string { return nil }, health: "store: embedded"},
	{name: "redis", flags: func(t *testing.T) []string {
		return []string{"-redis-url", redistest.Start(t).URL()}
	}, health: "store: ok"},
}

// forEachStore runs f in a parallel subtest per store.
func forEachStore(t *testing.T, f func(t *testing.T, st store)) {
	t.Helper()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			f(t, st)
		})
	}
}

// freeAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	return addr
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeConfig writes a limits file into a fresh temporary directory.
func writeConfig(t *testing.T, data string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "limits.yaml", data)
}

// replaceFile writes data to path the way editors and config management
// do: into a temporary file beside it, renamed over it.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// buffer is an io.Writer safe to read while a process writes to it.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is one run of the envoy-rls binary.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr buffer
	done           chan struct{} // closed once the process has exited
	waitErr        error         // Wait's result, set before done is closed

	mu       sync.Mutex
	termSent bool
}

// childEnv is the test's environment without any RLS_ variable, so that the
// caller's shell cannot change what a test runs, plus extra.
func childEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startProc starts the binary with args and the extra environment. The
// process is killed when the test ends if it is still running then; tests
// that expect a clean exit stop it themselves (server.stop).
func startProc(t *testing.T, args, env []string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = childEnv(env)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the process's exit status; -1 when a signal killed it. Call
// it only once the process has exited.
func (p *proc) exitCode() int { return p.cmd.ProcessState.ExitCode() }

// wait waits up to bound for the process to exit and reports whether it did.
func (p *proc) wait(bound time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(bound):
		return false
	}
}

// terminate sends SIGTERM, once: a second one, arriving after the service
// has stopped listening for signals, would kill it.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.termSent || p.exited() {
		return
	}
	p.termSent = true
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("SIGTERM: %v", err)
	}
}

// runBinary runs the binary to completion (bounded) and returns its output
// and exit status.
func runBinary(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, args, env)
	if !p.wait(exitBound) {
		t.Fatalf("envoy-rls %s: still running after %s; stderr:\n%s", strings.Join(args, " "), exitBound, p.stderr.String())
	}
	return p.stdout.String(), p.stderr.String(), p.exitCode()
}

// server is a running service and clients for it.
type server struct {
	*proc
	grpcAddr, httpAddr string
	conn               *grpc.ClientConn
	rls                rlsv3.RateLimitServiceClient
	health             healthpb.HealthClient

	stopOnce sync.Once
}

// dial returns a client connection to a gRPC address that reconnects
// quickly: a test waits for a server that is starting, not for a flaky
// network.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatalf("grpc.NewClient(%s): %v", addr, err)
	}
	return conn
}

// standardFlags are the flags every test server gets: its config, its
// addresses, no pprof, readable logs.
func standardFlags(config, grpcAddr, httpAddr string) []string {
	return []string{
		"-config", config,
		"-grpc-addr", grpcAddr,
		"-http-addr", httpAddr,
		"-debug-addr", "",
		"-log-format", "console",
	}
}

// startServer starts the service with the limits file or directory config,
// the standard flags and more flags, and waits until it serves.
func startServer(t *testing.T, config string, flags ...string) *server {
	t.Helper()
	return startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
		return append(standardFlags(config, grpcAddr, httpAddr), flags...), nil
	})
}

// startServerWith starts the service with the arguments and environment
// that launch returns for a pair of free addresses, waits until gRPC health
// answers SERVING, and stops it with SIGTERM when the test ends, failing
// the test unless it exits 0 in time. A port taken between picking and
// binding is retried with new ones.
func startServerWith(t *testing.T, launch func(grpcAddr, httpAddr string) (args, env []string)) *server {
	t.Helper()
	return startServerHealth(t, healthpb.HealthCheckResponse_SERVING, launch)
}

// startServerHealth is startServerWith waiting for gRPC health to answer
// want: NOT_SERVING for a server that serves but reports unhealthy (a
// Redis that refuses its settings).
func startServerHealth(t *testing.T, want healthpb.HealthCheckResponse_ServingStatus, launch func(grpcAddr, httpAddr string) (args, env []string)) *server {
	t.Helper()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
		args, env := launch(grpcAddr, httpAddr)
		p := startProc(t, args, env)
		err := waitHealth(t, p, grpcAddr, want)
		if err == nil {
			s := &server{proc: p, grpcAddr: grpcAddr, httpAddr: httpAddr}
			t.Cleanup(func() { s.stop(t) })
			s.conn = dial(t, grpcAddr)
			t.Cleanup(func() { s.conn.Close() })
			s.rls = rlsv3.NewRateLimitServiceClient(s.conn)
			s.health = healthpb.NewHealthClient(s.conn)
			return s
		}
		if attempt < attempts && p.exited() && strings.Contains(p.stderr.String(), "address already in use") {
			continue
		}
		t.Fatalf("envoy-rls %s: %v", strings.Join(args, " "), err)
	}
}

// waitHealth polls gRPC health at addr until it answers want, the
// process exits, or startBound passes.
func waitHealth(t *testing.T, p *proc, addr string, want healthpb.HealthCheckResponse_ServingStatus) error {
	t.Helper()
	conn := dial(t, addr)
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(startBound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		switch {
		case err == nil && resp.GetStatus() == want:
			return nil
		case p.exited():
			return fmt.Errorf("exited with status %d before serving; stderr:\n%s", p.exitCode(), p.stderr.String())
		case time.Now().After(deadline):
			return fmt.Errorf("gRPC health at %s: not %v after %s (last answer: %v, error: %v); stderr:\n%s",
				addr, want, startBound, resp.GetStatus(), err, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM (unless the test did) and fails the test unless the
// process exits 0 within exitBound, without a data race report.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.stopOnce.Do(func() {
		s.terminate(t)
		if !s.wait(exitBound) {
			t.Errorf("envoy-rls did not exit within %s of SIGTERM; stderr:\n%s", exitBound, s.stderr.String())
			return
		}
		stderr := s.stderr.String()
		if strings.Contains(stderr, "DATA RACE") {
			t.Errorf("the race detector reported a data race in envoy-rls; stderr:\n%s", stderr)
		}
		if got := s.exitCode(); got != 0 {
			t.Errorf("envoy-rls exit status after SIGTERM: got %d, want 0; stderr:\n%s", got, stderr)
		} else if t.Failed() {
			t.Logf("envoy-rls stderr:\n%s", stderr)
		}
	})
}

// shouldRateLimit calls the service over gRPC.
func (s *server) shouldRateLimit(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	return s.rls.ShouldRateLimit(ctx, req)
}

// decide calls the service over gRPC and fails the test on an error.
func (s *server) decide(t testing.TB, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := s.shouldRateLimit(req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// url is the address of an HTTP path of the server.
func (s *server) url(path string) string { return "http://" + s.httpAddr + path }

var httpClient = &http.Client{Timeout: callBound}

// get fetches an HTTP path and returns the status and body.
func (s *server) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(s.url(path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return readResponse(t, resp)
}

// post posts body to an HTTP path and returns the status and body.
func (s *server) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := httpClient.Post(s.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return readResponse(t, resp)
}

func readResponse(t testing.TB, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return resp.StatusCode, string(b)
}

// metric returns the value of one series (name{labels} exactly as the
// Prometheus text format writes it, labels sorted by name) from /metrics.
func (s *server) metric(t testing.TB, series string) (float64, bool) {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: got status %d, want 200; body:\n%s", code, body)
	}
	return metricValue(body, series)
}

func metricValue(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// poll calls cond every 20 ms until it reports true or bound passes, and
// reports whether it did. cond started before the bound counts.
func poll(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		start := time.Now()
		if cond() {
			return true
		}
		if start.After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Requests.

// request is a RateLimitRequest for domain.
func request(domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// desc is a descriptor of key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// awaitUndo waits until a peek of the descriptor kv of domain reads
// remaining want. A refusal's undo goes after its answer
// (docs/semantics.md, "The transient of charge-then-undo"): the caller's
// next call, at once, may still count the refused cost.
func awaitUndo(t *testing.T, s *server, domain string, want uint32, kv ...string) {
	t.Helper()
	var got uint32
	if !poll(10*time.Second, func() bool {
		got = s.decide(t, request(domain, withHits(desc(kv...), 0))).GetStatuses()[0].GetLimitRemaining()
		return got == want
	}) {
		t.Fatalf("%v: remaining %d 10 s after a refusal, want its undo back at %d", kv, got, want)
	}
}

// withHits sets the descriptor's own hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// Responses.

const (
	codeOK   = rlsv3.RateLimitResponse_OK
	codeOver = rlsv3.RateLimitResponse_OVER_LIMIT
)

// limit is the current_limit the service reports for a rule.
func limit(name string, rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit) *rlsv3.RateLimitResponse_RateLimit {
	return &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: rpu, Unit: unit}
}

// want is what one descriptor status must hold; limit nil means no
// current_limit (and then no remaining and no reset either).
type want struct {
	code      rlsv3.RateLimitResponse_Code
	limit     *rlsv3.RateLimitResponse_RateLimit
	remaining uint32
}

// checkResponse checks the overall code and every status, in order.
func checkResponse(t testing.TB, resp *rlsv3.RateLimitResponse, overall rlsv3.RateLimitResponse_Code, statuses ...want) {
	t.Helper()
	if got := resp.GetOverallCode(); got != overall {
		t.Errorf("overall_code: got %v, want %v (response %v)", got, overall, resp)
	}
	if got := len(resp.GetStatuses()); got != len(statuses) {
		t.Fatalf("statuses: got %d, want %d (response %v)", got, len(statuses), resp)
	}
	for i, w := range statuses {
		checkStatus(t, fmt.Sprintf("status %d", i), resp.GetStatuses()[i], w)
	}
}

func checkStatus(t testing.TB, label string, got *rlsv3.RateLimitResponse_DescriptorStatus, w want) {
	t.Helper()
	if got.GetCode() != w.code {
		t.Errorf("%s: code: got %v, want %v (status %v)", label, got.GetCode(), w.code, got)
	}
	if !proto.Equal(got.GetCurrentLimit(), w.limit) {
		t.Errorf("%s: current_limit: got {%v}, want {%v}", label, got.GetCurrentLimit(), w.limit)
	}
	if got.GetLimitRemaining() != w.remaining {
		t.Errorf("%s: limit_remaining: got %d, want %d", label, got.GetLimitRemaining(), w.remaining)
	}
	if w.limit == nil && got.GetDurationUntilReset() != nil {
		t.Errorf("%s: duration_until_reset: got %v, want none for a descriptor without a limit", label, got.GetDurationUntilReset().AsDuration())
	}
}

// checkReset checks a duration_until_reset that the service computed at some
// instant between `since` and now, and that would be want at `since`:
// it may be smaller by the time elapsed since then, plus rounding.
func checkReset(t testing.TB, label string, got *durationpb.Duration, want time.Duration, since time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: duration_until_reset: got none, want %s", label, want)
		return
	}
	d := got.AsDuration()
	lo, hi := want-time.Since(since)-resetSlack, want+resetSlack
	if d < lo || d > hi {
		t.Errorf("%s: duration_until_reset: got %s, want %s (between %s and %s)", label, d, want, lo, hi)
	}
}

// checkWindowReset checks the duration_until_reset of a window algorithm,
// f(e) where e is how far into its epoch-aligned window of period p the
// service's clock was. before is taken just before the call. When a window
// boundary passed during the call, e is unknown and nothing is checked.
func checkWindowReset(t testing.TB, label string, got *durationpb.Duration, p time.Duration, before time.Time, f func(e time.Duration) time.Duration) {
	t.Helper()
	after := time.Now()
	if before.UnixMicro()/p.Microseconds() != after.UnixMicro()/p.Microseconds() {
		t.Logf("%s: a %s window boundary passed during the call; duration_until_reset not checked", label, p)
		return
	}
	checkReset(t, label, got, f(windowElapsed(before, p)), before)
}

// windowElapsed is e of docs/semantics.md: how far now is into its
// epoch-aligned window of period p.
func windowElapsed(now time.Time, p time.Duration) time.Duration {
	return time.Duration(now.UnixMicro()%p.Microseconds()) * time.Microsecond
}
