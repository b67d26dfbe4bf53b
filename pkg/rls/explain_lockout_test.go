package rls

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestExplainLockout: explain shows a lockout's block_for and, once its
// key is locked, the lock's end, in JSON and text.
func TestExplainLockout(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(`
domain: edge
descriptors:
  - key: login_failed
    rate_limit: {name: lock, algorithm: fixed_window, unit: hour, requests_per_unit: 1, block_for: 15m}
`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nil, Options{})
	f.svc.SetIndex(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
	if ex := explain(t, f.svc, "edge", "login_failed", "alice"); ex.Limits[0].BlockFor != "15m0s" || ex.Limits[0].State.LockedUntil != "" {
		t.Fatalf("before any refusal: %s", jsonOf(ex.Limits))
	}
	f.call(t, desc("login_failed", "alice"))
	before := time.Now()
	f.call(t, desc("login_failed", "alice")) // refused: locks the key
	ex := explain(t, f.svc, "edge", "login_failed", "alice")
	st := ex.Limits[0].State
	until, err := time.Parse(time.RFC3339Nano, st.LockedUntil)
	if err != nil || st.Allowed || until.Before(before.Add(15*time.Minute-time.Second)) || until.After(time.Now().Add(15*time.Minute+time.Second)) {
		t.Fatalf("locked: %s (%v), want locked until about 15 minutes from now", jsonOf(ex.Limits), err)
	}
	var b strings.Builder
	if err := ex.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{", block_for 15m0s", "; locked until " + st.LockedUntil + ": a request would be refused"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
