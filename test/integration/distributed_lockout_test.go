package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

const lockoutConfig = `domain: lock
descriptors:
  - key: login_failed
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 3, block_for: 1h}
  - key: short
    rate_limit: {algorithm: fixed_window, unit: second, requests_per_unit: 1, block_for: 2s}
`

// TestDistributedLockout: three processes on one Redis, each with its
// over-limit cache. A refusal through one locks the key on all of them,
// for block_for whatever the window says; a POST /reset through one lifts
// it everywhere (the reset's pub/sub clears the other instances' cached
// refusals too); and the lock lifts by itself at block_for.
func TestDistributedLockout(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	config := writeConfig(t, lockoutConfig)
	const token = "lockout-test-token-0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("ops "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := make([]*server, 3)
	for i := range servers {
		servers[i] = startServer(t, config, "-redis-url", r.URL(), "-store-timeout", "2s", "-failure-mode", "error", "-admin-token-file", tokens)
	}
	hit := func(s *server, key string) *rlsv3.RateLimitResponse_DescriptorStatus {
		resp := s.decide(t, request("lock", desc(key, "alice")))
		return resp.GetStatuses()[0]
	}
	for i := range 3 {
		if st := hit(servers[i], "login_failed"); st.GetCode() != codeOK {
			t.Fatalf("attempt %d through instance %d: got %v, want OK", i, i, st.GetCode())
		}
	}
	// The fourth attempt locks the key, for an hour, on every instance
	// (twice each: the second one may come from an over-limit cache).
	for k, i := range []int{0, 1, 2, 0, 1, 2} {
		st := hit(servers[i], "login_failed")
		if st.GetCode() != codeOver || st.GetDurationUntilReset().AsDuration() < 59*time.Minute {
			t.Fatalf("locked attempt %d through instance %d: got %v, reset %v; want OVER_LIMIT for about an hour", k, i, st.GetCode(), st.GetDurationUntilReset().AsDuration())
		}
	}
	resetThrough(t, servers[1], token, `{"domain":"lock","descriptors":[{"entries":[{"key":"login_failed","value":"alice"}]}]}`)
	// Lifted on every instance, once its pub/sub has been heard.
	for i := range servers {
		deadline := time.Now().Add(5 * time.Second)
		for hit(servers[i], "login_failed").GetCode() != codeOK {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d still refuses 5 s after the reset", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A lock of 2 s on a window of 1 s: it outlives the window, on every
	// instance, and lifts by itself.
	var locked time.Time
	for attempt := 0; locked.IsZero(); attempt++ {
		if attempt == 5 {
			t.Fatal("no refusal of the short limit in 5 attempts")
		}
		before := time.Now()
		if hit(servers[0], "short").GetCode() == codeOver {
			locked = before
		}
	}
	time.Sleep(time.Until(locked.Add(1200 * time.Millisecond)))
	if st := hit(servers[1], "short"); st.GetCode() != codeOver || st.GetDurationUntilReset().AsDuration() > 800*time.Millisecond+clockSlack {
		t.Fatalf("1.2 s into the lock, through instance 1: got %v, reset %v; want OVER_LIMIT for at most 0.8 s", st.GetCode(), st.GetDurationUntilReset().AsDuration())
	}
	time.Sleep(time.Until(locked.Add(2*time.Second + 300*time.Millisecond)))
	if st := hit(servers[2], "short"); st.GetCode() != codeOK {
		t.Fatalf("past the lock's end, through instance 2: got %v, want OK", st.GetCode())
	}
}

// resetThrough posts a reset to s with the admin token.
func resetThrough(t *testing.T, s *server, token, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url("/reset"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("POST /reset: %v", err)
	}
	if code, text := readResponse(t, resp); code != http.StatusOK {
		t.Fatalf("POST /reset: %d %s", code, text)
	}
}
