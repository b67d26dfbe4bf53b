package integration

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// smallLimits is a valid limits file with two limits.
const smallLimits = `domain: small
descriptors:
  - key: user
    rate_limit:
      name: per-user
      unit: year
      requests_per_unit: 2
  - key: path
    value: /login
    rate_limit:
      algorithm: token_bucket
      unit: hour
      requests_per_unit: 10
      burst: 20
`

// badConfigs are limits files that must not load, with what the one line of
// the error must name: the line (0: none) and the words.
var badConfigs = []struct {
	name  string
	data  string
	line  int
	words []string
}{
	{
		name:  "unknown field",
		data:  "domain: api\ndescriptors:\n  - key: user\n    rate_limti:\n      unit: second\n      requests_per_unit: 10\n",
		line:  4,
		words: []string{"rate_limti"},
	},
	{
		name:  "bad unit",
		data:  "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 10\n",
		line:  5,
		words: []string{"unit", "fortnight"},
	},
	{
		name:  "bad algorithm",
		data:  "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n      algorithm: token_bukket\n",
		line:  7,
		words: []string{"algorithm", "token_bukket"},
	},
	{
		name:  "YAML syntax",
		data:  "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n     requests_per_unit: 10\n",
		line:  6,
		words: []string{"invalid YAML"},
	},
}

// checkErrorLine checks that out is one plain line naming path, line and
// words, and returns it.
func checkErrorLine(t *testing.T, what, out, path string, line int, words []string) string {
	t.Helper()
	msg := strings.TrimSuffix(out, "\n")
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("%s: stderr: got %q, want exactly one line", what, out)
	}
	if strings.HasPrefix(msg, "{") {
		t.Errorf("%s: stderr: got %q, want a plain line, not a JSON log", what, msg)
	}
	prefix := path + ":"
	if line > 0 {
		prefix += strconv.Itoa(line) + ":"
	}
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("%s: stderr: got %q, want it to start with %q", what, msg, prefix)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: stderr: got %q, want it to name %q", what, msg, w)
		}
	}
	return msg
}

// TestBadConfigAtStart: an invalid limits file stops the start with a
// non-zero status and one plain line on stderr, the same as check-config's.
func TestBadConfigAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.data)
			// The default JSON log format: the error line must not be a log.
			_, stderr, code := runBinary(t, nil, "-config", path, "-grpc-addr", freeAddr(t), "-http-addr", freeAddr(t), "-debug-addr", "")
			if code == 0 {
				t.Errorf("exit status: got 0, want non-zero")
			}
			msg := checkErrorLine(t, "start", stderr, path, tc.line, tc.words)
			_, checkErr, _ := runBinary(t, nil, "check-config", path)
			if got := strings.TrimSpace(checkErr); got != msg {
				t.Errorf("check-config error: got %q, want the start's %q", got, msg)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "nope.yaml")
		_, stderr, code := runBinary(t, nil, "-config", path, "-grpc-addr", freeAddr(t), "-http-addr", freeAddr(t), "-debug-addr", "")
		if code == 0 {
			t.Errorf("exit status: got 0, want non-zero")
		}
		checkErrorLine(t, "start", stderr, path, 0, []string{"no such file"})
	})
}

// TestCheckConfig: `envoy-rls check-config PATH` exits 0 on a good file or
// directory, 1 with the error on a bad one.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	t.Run("good file", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, smallLimits)
		stdout, stderr, code := runBinary(t, nil, "check-config", path)
		if want := path + ": OK, 1 domain, 2 limits (0 unlimited) on 2 descriptors\n"; code != 0 || stdout != want {
			t.Errorf("check-config: got status %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
		}
	})
	t.Run("good directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, "small.yaml", smallLimits)
		writeFile(t, dir, "reload.yml", reloadLimits(3))
		writeFile(t, dir, ".hidden.yaml", "not: a limits file\n")
		writeFile(t, dir, "README.txt", "not a limits file\n")
		stdout, stderr, code := runBinary(t, nil, "check-config", dir)
		if want := dir + ": OK, 2 domains, 3 limits (0 unlimited) on 3 descriptors\n"; code != 0 || stdout != want {
			t.Errorf("check-config: got status %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
		}
	})
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.data)
			stdout, stderr, code := runBinary(t, nil, "check-config", path)
			if code != 1 {
				t.Errorf("check-config: got status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("check-config: stdout: got %q, want nothing", stdout)
			}
			checkErrorLine(t, "check-config", stderr, path, tc.line, tc.words)
		})
	}
}

// TestSIGTERM: SIGTERM turns gRPC health NOT_SERVING (or closes the
// connection), and the process exits 0 within the shutdown bound.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		s := startServer(t, writeConfig(t, smallLimits), st.flags(t)...)
		checkResponse(t, s.decide(t, request("small", desc("user", "u"))), codeOK, want{codeOK, limit("per-user", 2, unitYear), 1})

		ctx, cancel := context.WithTimeout(context.Background(), exitBound)
		defer cancel()
		stream, err := s.health.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health Watch: %v", err)
		}
		if m, err := stream.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health Watch before SIGTERM: got %v, %v; want SERVING", m.GetStatus(), err)
		}

		sent := time.Now()
		s.terminate(t)
		for {
			m, err := stream.Recv()
			if err != nil {
				if c := status.Code(err); c == codes.DeadlineExceeded {
					t.Fatalf("health Watch after SIGTERM: no NOT_SERVING and no close within %s", exitBound)
				}
				t.Logf("health Watch after SIGTERM: closed (%v) after %s", err, time.Since(sent).Round(time.Millisecond))
				break
			}
			if m.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
				t.Logf("health Watch after SIGTERM: NOT_SERVING after %s", time.Since(sent).Round(time.Millisecond))
				break
			}
		}
		cancel() // the stream would hold the drain up

		if !s.wait(exitBound) {
			t.Fatalf("envoy-rls still running %s after SIGTERM; stderr:\n%s", exitBound, s.stderr.String())
		}
		if got := s.exitCode(); got != 0 {
			t.Errorf("exit status after SIGTERM: got %d, want 0; stderr:\n%s", got, s.stderr.String())
		}
		t.Logf("exited %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
	})
}

// flagsToEnv turns flags (-name value pairs) into their RLS_ environment
// twins.
func flagsToEnv(flags []string) []string {
	var env []string
	for i := 0; i+1 < len(flags); i += 2 {
		name := strings.TrimLeft(flags[i], "-")
		env = append(env, "RLS_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"="+flags[i+1])
	}
	return env
}

// TestEnvironment: every setting through its RLS_ twin.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		config := writeConfig(t, smallLimits)
		storeEnv := flagsToEnv(st.flags(t))
		s := startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
			env := append([]string{
				"RLS_CONFIG=" + config,
				"RLS_GRPC_ADDR=" + grpcAddr,
				"RLS_HTTP_ADDR=" + httpAddr,
				"RLS_LOG_FORMAT=console",
			}, storeEnv...)
			// An empty RLS_DEBUG_ADDR cannot turn pprof off; the flag can.
			return []string{"-debug-addr", ""}, env
		})
		checkResponse(t, s.decide(t, request("small", desc("user", "u"))), codeOK, want{codeOK, limit("per-user", 2, unitYear), 1})
		if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, st.health) {
			t.Errorf("GET /healthz: got %d %q, want 200 with %q", code, body, st.health)
		}
		if first, _, _ := strings.Cut(s.stderr.String(), "\n"); strings.HasPrefix(first, "{") {
			t.Errorf("RLS_LOG_FORMAT=console: got a JSON log line %q", first)
		}
	})
}

// TestEnvironmentCommandLineWins: a flag on the command line beats its RLS_
// twin, which is then not even read.
func TestEnvironmentCommandLineWins(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, smallLimits)
	envGRPC, envHTTP := freeAddr(t), freeAddr(t)
	s := startServerWith(t, func(grpcAddr, httpAddr string) ([]string, []string) {
		env := []string{
			"RLS_CONFIG=" + filepath.Join(t.TempDir(), "missing.yaml"),
			"RLS_GRPC_ADDR=" + envGRPC,
			"RLS_HTTP_ADDR=" + envHTTP,
			"RLS_FAILURE_MODE=bogus",
			"RLS_LOG_FORMAT=bogus",
		}
		return append(standardFlags(config, grpcAddr, httpAddr), "-failure-mode", "deny"), env
	})
	checkResponse(t, s.decide(t, request("small", desc("user", "u"))), codeOK, want{codeOK, limit("per-user", 2, unitYear), 1})
	if code, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz on the -http-addr: got %d, want 200", code)
	}
	for _, addr := range []string{envGRPC, envHTTP} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("dial %s (the environment's address): got a connection, want none: the flag wins", addr)
		}
	}
}

// TestEnvironmentBadValue: an invalid RLS_ value stops the start and names
// the variable.
func TestEnvironmentBadValue(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, smallLimits)
	_, stderr, code := runBinary(t, []string{"RLS_FAILURE_MODE=bogus"}, standardFlags(config, freeAddr(t), freeAddr(t))...)
	if code == 0 || !strings.Contains(stderr, "RLS_FAILURE_MODE") {
		t.Errorf("RLS_FAILURE_MODE=bogus: got status %d, stderr %q; want non-zero and the variable named", code, stderr)
	}
}

// TestSIGTERMDrainsInFlight: a request in flight when SIGTERM arrives is
// answered (here, one held up in a paused Redis), then the process exits 0.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	// A store timeout long enough for the request to wait out the pause.
	s := startServer(t, writeConfig(t, smallLimits), "-redis-url", r.URL(), "-store-timeout", "10s")
	lim := limit("per-user", 2, unitYear)
	checkResponse(t, s.decide(t, request("small", desc("user", "warm"))), codeOK, want{codeOK, lim, 1})

	watchCtx, cancelWatch := context.WithTimeout(context.Background(), exitBound)
	defer cancelWatch()
	stream, err := s.health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health Watch: %v", err)
	}
	if m, err := stream.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Watch before SIGTERM: got %v, %v; want SERVING", m.GetStatus(), err)
	}

	// Scripts are writes: CLIENT PAUSE WRITE holds them, and lets INFO
	// show when the request's script is waiting.
	if _, err := r.Do("CLIENT", "PAUSE", "10000", "WRITE"); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	defer r.Do("CLIENT", "UNPAUSE") //nolint:errcheck // best effort if the test fails early
	type result struct {
		resp *rlsv3.RateLimitResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), exitBound)
		defer cancel()
		resp, err := s.rls.ShouldRateLimit(ctx, request("small", desc("user", "inflight")))
		done <- result{resp, err}
	}()
	if !poll(5*time.Second, func() bool {
		info, err := r.Do("INFO", "clients")
		return err == nil && !strings.Contains(info, "blocked_clients:0\r\n")
	}) {
		t.Fatal("the request's script never waited in the paused Redis")
	}

	s.terminate(t)
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("health Watch after SIGTERM: got %v, want NOT_SERVING while a request is in flight", err)
		}
		if m.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
	}
	// Then the Watch stream ends, so that it cannot hold the drain open.
	if m, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("health Watch after NOT_SERVING: got %v, %v; want the stream ended with UNAVAILABLE", m, err)
	}
	cancelWatch()
	select {
	case res := <-done:
		t.Fatalf("the request in flight ended before Redis answered: %v, %v", res.resp, res.err)
	default:
	}
	// While the drain waits, HTTP health says the service is going away.
	if code, body := s.get(t, "/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /healthz while draining: got %d %q, want 503", code, body)
	}
	if _, err := r.Do("CLIENT", "UNPAUSE"); err != nil {
		t.Fatalf("CLIENT UNPAUSE: %v", err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("the request in flight at SIGTERM: got error %v, want an answer", res.err)
	}
	checkResponse(t, res.resp, codeOK, want{codeOK, lim, 1})
	if !s.wait(exitBound) {
		t.Fatalf("envoy-rls still running %s after SIGTERM; stderr:\n%s", exitBound, s.stderr.String())
	}
	if got := s.exitCode(); got != 0 {
		t.Errorf("exit status after SIGTERM: got %d, want 0; stderr:\n%s", got, s.stderr.String())
	}
}
