package integration

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/rlqstest"
)

// One simulated Envoy, enforcing what envoy-rls assigns as Envoy 1.40
// does, gets its whole limit: asking for five times the limit, it is
// allowed the limit's rate once its first assignment is in, on either
// store.
func TestRLQSSimulatedEnvoyGetsWholeLimit(t *testing.T) {
	const (
		limit    = 100 // per second, rlqsLimits's
		interval = time.Second
		warmup   = 3 * time.Second
		window   = 3 * time.Second
	)
	forEachStore(t, func(t *testing.T, st store) {
		s := startServer(t, writeConfig(t, rlqsLimits), append(st.flags(t), "-rlqs-report-interval", interval.String())...)
		e := rlqstest.New(s.conn, rlqstest.Options{Domain: "edge", ReportInterval: interval})
		defer e.Close()
		id := map[string]string{"path": "/api"}
		tick := time.NewTicker(2 * time.Millisecond) // about 500 a second
		defer tick.Stop()
		start := time.Now()
		var allowed, asked int
		for now := range tick.C {
			if now.Sub(start) >= warmup+window {
				break
			}
			ok := e.Allow(id)
			if now.Sub(start) >= warmup {
				asked++
				if ok {
					allowed++
				}
			}
		}
		strategy, _ := e.Strategy(id)
		tb := strategy.GetTokenBucket()
		if tb == nil {
			t.Fatalf("strategy after %v: %v, want a token bucket", warmup+window, strategy)
		}
		want := limit * window.Seconds()
		// Wide margins: 2 shared cores; a replaced bucket starts full, so
		// one max_tokens may come on top.
		lo, hi := 0.85*want, 1.15*want+float64(tb.GetMaxTokens())
		if float64(allowed) < lo || float64(allowed) > hi {
			t.Fatalf("allowed %d of %d asked in %v, want %.0f to %.0f (the limit, %d a second); stats %+v, bucket %v",
				allowed, asked, window, lo, hi, limit, e.Stats(), tb)
		}
		t.Logf("allowed %d of %d asked in %v (limit %.0f); bucket %v", allowed, asked, window, want, tb)
		if st := e.Stats(); st.Streams != 1 || st.Dropped != 0 || st.Skipped != 0 {
			t.Fatalf("stats %+v, want 1 stream, no action dropped or skipped", st)
		}
	})
}
