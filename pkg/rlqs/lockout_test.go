package rlqs

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestLockouts: the load names every limit with a block_for, by file and
// line, and no other.
func TestLockouts(t *testing.T) {
	d, err := config.Parse("auth.yaml", []byte(`domain: auth
descriptors:
  - key: login_failed
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 6, block_for: 15m}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 6}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Domains: map[string]*config.Domain{d.Name: d}}
	got := Lockouts(cfg)
	if len(got) != 1 || got[0] != "auth.yaml:4: auth: block_for 15m0s" {
		t.Fatalf("Lockouts: got %q", got)
	}
}
