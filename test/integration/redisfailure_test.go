package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// failureLimits has one limit that takes the -failure-mode flag and one
// that sets its own.
const failureLimits = `domain: fail
descriptors:
  - key: k
    rate_limit:
      name: k
      unit: year
      requests_per_unit: 5
  - key: strict
    rate_limit:
      name: strict
      unit: year
      requests_per_unit: 5
      failure_mode: deny
`

// failureBound is the most a decision may take while Redis is down: the
// store gives up after -store-timeout (50 ms); a second is generous.
const failureBound = time.Second

var (
	limitK      = limit("k", 5, unitYear)
	limitStrict = limit("strict", 5, unitYear)
)

// decideFast decides req and fails the test unless the answer comes within
// failureBound.
func decideFast(t *testing.T, s *server, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	start := time.Now()
	resp := s.decide(t, req)
	if d := time.Since(start); d > failureBound {
		t.Errorf("ShouldRateLimit with Redis down: took %s, want at most %s", d, failureBound)
	}
	return resp
}

// checkFailOpen: with -failure-mode allow, the limit that takes the flag is
// OK with its whole quota; the one that says deny is OVER_LIMIT.
func checkFailOpen(t *testing.T, s *server) {
	t.Helper()
	for i := range 3 {
		resp := decideFast(t, s, request("fail", desc("k", "down"+strconv.Itoa(i))))
		checkResponse(t, resp, codeOK, want{codeOK, limitK, 5})
	}
	resp := decideFast(t, s, request("fail", desc("k", "down"), desc("strict", "down")))
	checkResponse(t, resp, codeOver, want{codeOK, limitK, 5}, want{codeOver, limitStrict, 0})
	checkUnreachable(t, s)
}

// checkFailClosed: with -failure-mode deny, every limit is OVER_LIMIT.
func checkFailClosed(t *testing.T, s *server) {
	t.Helper()
	for i := range 3 {
		resp := decideFast(t, s, request("fail", desc("k", "down"+strconv.Itoa(i))))
		checkResponse(t, resp, codeOver, want{codeOver, limitK, 0})
	}
	// A descriptor without a limit needs no store.
	resp := decideFast(t, s, request("fail", desc("nokey", "x"), desc("strict", "down")))
	checkResponse(t, resp, codeOver, want{code: codeOK}, want{codeOver, limitStrict, 0})
	checkUnreachable(t, s)
}

// checkUnreachable: the health endpoints stay 200 and say the store is
// unreachable.
func checkUnreachable(t *testing.T, s *server) {
	t.Helper()
	for _, path := range []string{"/healthz", "/healthcheck"} {
		code, body := s.get(t, path)
		if code != http.StatusOK || !strings.Contains(body, "store: unreachable") {
			t.Errorf("GET %s with Redis down: got %d %q, want 200 with %q", path, code, body, "store: unreachable")
		}
	}
	checkServing(t, s)
}

// TestRedisFailure: Redis going away, or never there, makes the service
// answer promptly by its failure mode, and it keeps serving.
func TestRedisFailure(t *testing.T) {
	t.Parallel()
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		r := redistest.Start(t)
		config := writeConfig(t, failureLimits)
		allow := startServer(t, config, "-redis-url", r.URL(), "-failure-mode", "allow")
		deny := startServer(t, config, "-redis-url", r.URL(), "-failure-mode", "deny")
		// Both processes share the Redis: distinct values keep their
		// counters apart.
		for i, s := range []*server{allow, deny} {
			v := "up" + strconv.Itoa(i)
			checkResponse(t, s.decide(t, request("fail", desc("k", v), desc("strict", v))),
				codeOK, want{codeOK, limitK, 4}, want{codeOK, limitStrict, 4})
		}

		r.Stop()
		t.Run("allow", func(t *testing.T) { checkFailOpen(t, allow) })
		t.Run("deny", func(t *testing.T) { checkFailClosed(t, deny) })
		series := `rls_decisions_total{domain="fail",outcome="store_failed_allow",rule="k"}`
		if got, ok := allow.metric(t, series); !ok || got != 4 {
			t.Errorf("%s: got %v (present %t), want 4", series, got, ok)
		}

		// Back to normal once Redis is (an empty one, without the scripts).
		r.Restart()
		for p, s := range []*server{allow, deny} {
			var last *rlsv3.RateLimitResponse
			i := 0
			if !poll(5*time.Second, func() bool {
				i++
				last = s.decide(t, request("fail", desc("k", "back"+strconv.Itoa(p)+"-"+strconv.Itoa(i))))
				return last.GetStatuses()[0].GetLimitRemaining() == 4
			}) {
				t.Errorf("after Redis restarted: got %v, want limit_remaining 4 within 5 s; stderr:\n%s", last, s.stderr.String())
			}
			if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, "store: ok") {
				t.Errorf("GET /healthz after Redis restarted: got %d %q, want 200 with %q", code, body, "store: ok")
			}
		}
	})
	t.Run("slow", func(t *testing.T) {
		t.Parallel()
		r := redistest.Start(t)
		s := startServer(t, writeConfig(t, failureLimits), "-redis-url", r.URL(), "-failure-mode", "allow")
		checkResponse(t, s.decide(t, request("fail", desc("k", "before"))), codeOK, want{codeOK, limitK, 4})

		// Redis stops answering for a while: the store gives up after
		// -store-timeout and the limit fails open.
		if _, err := r.Do("CLIENT", "PAUSE", "1500", "ALL"); err != nil {
			t.Fatalf("CLIENT PAUSE: %v", err)
		}
		paused := time.Now()
		for i := range 3 {
			resp := decideFast(t, s, request("fail", desc("k", "paused"+strconv.Itoa(i))))
			if time.Since(paused) < 1500*time.Millisecond {
				checkResponse(t, resp, codeOK, want{codeOK, limitK, 5})
			}
		}

		// Once Redis answers again, answers are exact again: no reply of a
		// timed-out call is read as the answer to a later one.
		i := 0
		if !poll(5*time.Second, func() bool {
			i++
			resp := s.decide(t, request("fail", desc("k", "resumed"+strconv.Itoa(i))))
			return resp.GetStatuses()[0].GetLimitRemaining() == 4
		}) {
			t.Fatalf("after CLIENT PAUSE ended: no exact answer within 5 s; stderr:\n%s", s.stderr.String())
		}
		for _, rem := range []uint32{4, 3, 2, 1, 0} {
			checkResponse(t, s.decide(t, request("fail", desc("k", "exact"))), codeOK, want{codeOK, limitK, rem})
		}
		checkResponse(t, s.decide(t, request("fail", desc("k", "exact"))), codeOver, want{codeOver, limitK, 0})
	})
	t.Run("absent at start", func(t *testing.T) {
		t.Parallel()
		url := "redis://" + freeAddr(t) // nothing listens there
		config := writeConfig(t, failureLimits)
		t.Run("allow", func(t *testing.T) {
			t.Parallel()
			checkFailOpen(t, startServer(t, config, "-redis-url", url, "-failure-mode", "allow"))
		})
		t.Run("deny", func(t *testing.T) {
			t.Parallel()
			checkFailClosed(t, startServer(t, config, "-redis-url", url, "-failure-mode", "deny"))
		})
	})
}
