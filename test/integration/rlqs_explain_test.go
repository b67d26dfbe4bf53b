package integration

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
)

const rlqsExplainLimits = rlqsLimits + `
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60}
`

// explainJSON runs `envoy-rls explain -rlqs -json` with args and reads
// its bucket.
func explainJSON(t *testing.T, args ...string) rlqs.Bucket {
	t.Helper()
	out, errOut, code := runBinary(t, nil, append([]string{"explain", "-rlqs", "-json"}, args...)...)
	if code != 0 {
		t.Fatalf("explain %v: exit %d: %s", args, code, errOut)
	}
	var b rlqs.Bucket
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("explain %v: %v: %s", args, err, out)
	}
	return b
}

// checkClients checks that b lists clients demanding want (per second),
// with shares summing to no more than the limit.
func checkClients(t *testing.T, how string, b rlqs.Bucket, want ...float64) {
	t.Helper()
	var got []float64
	sum := 0.0
	for _, c := range b.Clients {
		if c.DemandPerSecond == nil {
			t.Fatalf("%s: client %s with an unknown demand", how, c.ID)
		}
		got = append(got, *c.DemandPerSecond)
		sum += c.SharePerSecond
		if c.TokenBucket == nil {
			t.Fatalf("%s: client %s without a token bucket", how, c.ID)
		}
	}
	sort.Float64s(got)
	if len(got) != len(want) || b.Outcome != rlqs.OutcomeDivided || b.RatePerSecond != 100 {
		t.Fatalf("%s: %s at %v/s, demands %v; want divided at 100/s, demands %v", how, b.Outcome, b.RatePerSecond, got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("%s: demands %v, want %v", how, got, want)
		}
	}
	if sum > 100+1e-9 || math.Abs(sum-b.TotalPerSecond) > 1e-9 {
		t.Fatalf("%s: shares sum to %v (told %v), over the limit of 100", how, sum, b.TotalPerSecond)
	}
}

// explain -rlqs asks a running server (its GET /rlqs) about a bucket its
// Envoys report, on either store; with Redis, explain reads the demands
// from Redis itself too; ids no limit divides say so.
func TestRLQSExplain(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) {
		cfg := writeConfig(t, rlqsExplainLimits)
		// Demands live three report intervals: long enough here for the
		// explain run from the store, a process of its own started after
		// the reports, to find them on a loaded machine.
		flags := append(st.flags(t), "-rlqs-report-interval", "5s")
		adminURL, authArgs := "", []string(nil)
		var s *server
		if st.name == "embedded" {
			// A listener of its own, without a token.
			admin := freeAddr(t)
			s = startServer(t, cfg, append(flags, "-admin-addr", admin)...)
			adminURL = "http://" + admin
		} else {
			// Beside the API, behind a token.
			tokens := writeFile(t, t.TempDir(), "tokens", "ops ops-0123456789abcdef\n")
			s = startServer(t, cfg, append(flags, "-admin-token-file", tokens)...)
			adminURL, authArgs = "http://"+s.httpAddr, []string{"-admin-token-file", tokens}
		}
		small, big := newRLQSClient(t, s), newRLQSClient(t, s)
		small.report(10, time.Second)
		big.report(200, time.Second)

		b := explainJSON(t, append(append([]string{"-addr", adminURL}, authArgs...), "edge", "path=/api")...)
		checkClients(t, "the server", b, 10, 200)
		for _, c := range b.Clients {
			if !c.Here || c.AssignedPerSecond == nil {
				t.Errorf("the server: client %+v not here, or without what it was sent", c)
			}
		}
		if want := map[string]string{"embedded": "embedded", "redis": "shared"}[st.name]; b.Store != want {
			t.Errorf("the server's store: %s, want %s", b.Store, want)
		}

		// Without -addr: the store, read as the server reads it.
		local := append([]string{"-config", cfg}, storeArgs(t, flags)...)
		out, _, code := runBinary(t, nil, append(append([]string{"explain", "-rlqs"}, local...), "edge", "path=/api")...)
		if code != 0 {
			t.Fatalf("explain from the store: exit %d", code)
		}
		if st.name == "embedded" {
			if !strings.Contains(out, "clients:    0 live") || !strings.Contains(out, "Ask the server: envoy-rls explain -rlqs -addr") {
				t.Fatalf("explain on the embedded store does not point at the server:\n%s", out)
			}
		} else {
			checkClients(t, "Redis", explainJSON(t, append(local, "edge", "path=/api")...), 10, 200)
		}

		// The outcomes that divide nothing, asked of the server directly.
		for path, want := range map[string]string{
			"/nope": rlqs.OutcomeNoMatch, "/login": rlqs.OutcomeNoLimit, "/free": rlqs.OutcomeUnlimited,
			"/closed": rlqs.OutcomeDeny, "/shadow": rlqs.OutcomeShadow,
		} {
			got := getBucket(t, adminURL, "edge", "path="+url.QueryEscape(path))
			if got.Outcome != want || len(got.Clients) != 0 {
				t.Errorf("%s: outcome %s with %d clients, want %s and none", path, got.Outcome, len(got.Clients), want)
			}
		}
		if got := getBucket(t, adminURL, "elsewhere", "path=%2Fapi"); got.Outcome != rlqs.OutcomeUnknownDomain {
			t.Errorf("an unknown domain: %s", got.Outcome)
		}
	})
}

// storeArgs are the store's flags among flags: the ones explain shares
// with the server.
func storeArgs(t *testing.T, flags []string) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(flags); i++ {
		if flags[i] == "-redis-url" {
			out = append(out, flags[i], flags[i+1])
			i++
		}
	}
	return out
}

// getBucket asks GET /rlqs as JSON, with the test's token.
func getBucket(t *testing.T, base, domain, bucket string) rlqs.Bucket {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/rlqs?format=json&domain="+domain+"&bucket="+bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer ops-0123456789abcdef")
	c := http.Client{Timeout: callBound}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var b rlqs.Bucket
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &b) != nil {
		t.Fatalf("GET /rlqs %s %s: %s %s", domain, bucket, resp.Status, body)
	}
	return b
}
