package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// TestHoldsUsage: a tenant's read of its usage through one instance shows
// the holds made through another, counted in used and named as held, and
// reading it consumes nothing; the settle takes the hold out of it.
func TestHoldsUsage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, st store) {
		config := writeConfig(t, holdsConfig)
		flags := append(st.flags(t), "-store-timeout", "2s", "-failure-mode", "error", "-usage-endpoint")
		a := startServer(t, config, flags...)
		b := a
		if st.name == "redis" {
			b = startServer(t, config, flags...)
		}
		read := func() rls.UsedLimit {
			t.Helper()
			code, body := distGet(t, b.url("/v1/usage?domain=llm&descriptor=api_key=lapse"))
			if code != http.StatusOK {
				t.Fatalf("GET /v1/usage: %d %s", code, body)
			}
			var u rls.Usage
			if err := json.Unmarshal([]byte(body), &u); err != nil || len(u.Limits) != 1 {
				t.Fatalf("GET /v1/usage: %v, %s", err, body)
			}
			return u.Limits[0]
		}
		a.decide(t, holdCall("lapse", "r1", false, 30))
		a.decide(t, holdCall("lapse", "", false, 5))
		for range 2 {
			if u := read(); !u.HeldKnown || u.Held != 30 || u.Holds != 1 || u.Used != 35 || u.Remaining != 65 {
				t.Fatalf("usage with a hold of 30 and a charge of 5: %+v", u)
			}
		}
		a.decide(t, holdCall("lapse", "r1", true, 12))
		// On Redis the held cost is given back just after the settle's
		// answer: wait for it, within a wide margin.
		deadline := time.Now().Add(5 * time.Second)
		for u := read(); u.Held != 0 || u.Holds != 0 || u.Used != 17 || u.Remaining != 83; u = read() {
			if time.Now().After(deadline) {
				t.Fatalf("usage after the settle of 12: %+v", u)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
