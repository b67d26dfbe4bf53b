package rls

import (
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// syncLimits are a hot-key limit (tenant) and a plain one (user).
const syncLimits = `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {name: hot, algorithm: token_bucket, unit: second, requests_per_unit: 1000, sync_interval: 10ms}
  - key: user
    rate_limit: {name: plain, algorithm: fixed_window, unit: second, requests_per_unit: 10}
`

// TestExplainSyncInterval: explain shows a hot-key limit's sync_interval,
// in JSON as the limit's own field and in text as a line of its own; a
// limit without one shows neither.
func TestExplainSyncInterval(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(syncLimits))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nil, Options{})
	f.svc.SetIndex(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}))
	for _, c := range []struct{ key, field, json, text string }{
		{"tenant", "10ms", `"sync_interval": "10ms"`, "      hot key: sync_interval 10ms, "},
		{"user", "", "", ""},
	} {
		ex := explain(t, f.svc, "edge", c.key, "acme")
		var b strings.Builder
		if err := ex.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		js, text := jsonOf(ex.Limits), b.String()
		if ex.Limits[0].SyncInterval != c.field {
			t.Errorf("%s: sync_interval explained as %q, want %q", c.key, ex.Limits[0].SyncInterval, c.field)
		}
		if c.json == "" && (strings.Contains(js, "sync_interval") || strings.Contains(text, "sync_interval")) {
			t.Errorf("%s: a limit without sync_interval shows one:\n%s\n%s", c.key, js, text)
		}
		if c.json != "" && (!strings.Contains(js, c.json) || !strings.Contains(text, c.text)) {
			t.Errorf("%s: want %q in JSON and %q in text:\n%s\n%s", c.key, c.json, c.text, js, text)
		}
	}
}
