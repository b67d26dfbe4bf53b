package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestLayersEdgeIn429 is docs/layers.md's edge step over gRPC: one
// address (every curl from the host comes from the Docker gateway's)
// sends 601 requests to the app within a minute, as alice, 10 ms apart.
// The edge knows no user (Authorization builds no descriptor): it counts
// the address and its subnet, lets 600 through to the app and refuses the
// 601st with per-ip, whatever the app would have said; the headers Envoy
// builds from the statuses are the ones the doc shows.
func TestLayersEdgeIn429(t *testing.T) {
	e := loadEdge(t)
	s := startServer(t)
	r := request{"GET", "/", map[string]string{"authorization": "Bearer alice"}, "172.18.0.1"}
	ds := envoyDescriptors(t, e, r)
	var shapes []string
	for _, d := range ds {
		shapes = append(shapes, shape(d))
	}
	if got, want := strings.Join(shapes, " "), "[remote_address=172.18.0.1] [masked_remote_address=172.18.0.0/24]"; got != want {
		t.Fatalf("GET / as alice sends %s, want %s: the edge limits addresses, not users", got, want)
	}

	const perIP = 600
	const wantLimit = `600, 600;w=60;name="per-ip", 6000;w=60;name="per-subnet"`
	var lines []string
	for i := 1; i <= perIP+1; i++ {
		resp := s.ask(t, e, ds)
		limit, remaining, reset := xRateLimitHeaders(resp.GetStatuses())
		// Reset, while allowed: until the minute's count has left the
		// sliding window, the minute's end and a minute (120 s from the
		// first, on the minute's start); checked on the first only.
		wantCode, wantRemaining, wantReset := rlsv3.RateLimitResponse_OK, fmt.Sprint(perIP-i), reset
		switch i {
		case 1:
			wantReset = "120"
		case perIP + 1:
			// 6 s into the minute: per-ip's reset is its end, 54 s on.
			wantCode, wantRemaining, wantReset = rlsv3.RateLimitResponse_OVER_LIMIT, "0", "54"
		}
		if resp.GetOverallCode() != wantCode || limit != wantLimit || remaining != wantRemaining || reset != wantReset {
			t.Fatalf("request %d: %v, limit %q, remaining %s, reset %s; want %v, %q, %s, %s",
				i, resp.GetOverallCode(), limit, remaining, reset, wantCode, wantLimit, wantRemaining, wantReset)
		}
		if i == 1 || i == perIP+1 {
			lines = append(lines, "x-ratelimit-limit: "+limit, "x-ratelimit-remaining: "+remaining, "x-ratelimit-reset: "+reset)
			t.Logf("request %d: %v\n  %s", i, resp.GetOverallCode(), strings.Join(lines[len(lines)-3:], "\n  "))
		}
		s.clock.Add((10 * time.Millisecond).Microseconds())
	}

	doc := string(readRepoFile(t, "docs/layers.md"))
	for i := 0; i < len(lines); i += 3 {
		if shown := strings.Join(lines[i:i+3], "\n"); !strings.Contains(doc, shown) {
			t.Errorf("docs/layers.md does not show Envoy's headers as the test got them:\n%s", shown)
		}
	}
}
