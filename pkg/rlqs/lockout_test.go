package rlqs

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestLockouts: a bucket of a limit with a block_for is said at info,
// once, by file and line; a bucket of another limit is not.
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
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	core, logs := observer.New(zap.DebugLevel)
	var c caveats
	for range 2 {
		for _, desc := range d.Descriptors {
			c.note(zap.New(core), ix, d.Name, &descriptors.Node{Descriptor: desc})
		}
	}
	all := logs.All()
	if len(all) != 1 || all[0].Level != zap.InfoLevel || all[0].ContextMap()["limit"] != "auth.yaml:4 (auth)" {
		t.Fatalf("logged %v, want one info line of auth.yaml:4 (auth)", all)
	}
}
