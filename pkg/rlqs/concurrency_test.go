package rlqs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const concurrencyYAML = `
domain: edge
descriptors:
  - key: path
    value: /only
    rate_limit: {algorithm: concurrency, requests_per_unit: 10, lease: 30s}
  - key: path
    value: /mixed
    rate_limits:
      - {algorithm: concurrency, requests_per_unit: 10}
      - {unit: second, requests_per_unit: 50}
`

// TestConcurrencyLeftOut: a bucket whose only limit is a concurrency limit
// is answered ALLOW_ALL, one with other limits is divided by them alone,
// and a stream's first bucket of each concurrency rule is warned about,
// once.
func TestConcurrencyLeftOut(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(concurrencyYAML))
	if err != nil {
		t.Fatal(err)
	}
	only := &descriptors.Node{Descriptor: d.Descriptors[0]}
	if rate, k := limitRate(only, time.Now()); k != allowAll || rate != 0 {
		t.Errorf("concurrency alone: rate %v kind %v, want ALLOW_ALL", rate, k)
	}
	mixed := &descriptors.Node{Descriptor: d.Descriptors[1]}
	if rate, k := limitRate(mixed, time.Now()); k != divided || rate != 50 {
		t.Errorf("concurrency beside 50/s: rate %v kind %v, want 50/s divided", rate, k)
	}
	cfg := &config.Config{Domains: map[string]*config.Domain{d.Name: d}}
	core, logs := observer.New(zap.DebugLevel)
	var c caveats
	for range 2 {
		for _, n := range []*descriptors.Node{only, mixed} {
			c.note(zap.New(core), descriptors.NewIndex(cfg), d.Name, n)
		}
	}
	var got []string
	for _, e := range logs.All() {
		if e.Level != zap.WarnLevel || !strings.Contains(e.Message, "concurrency limit") {
			t.Errorf("logged %s %q", e.Level, e.Message)
		}
		got = append(got, e.ContextMap()["limit"].(string))
	}
	if want := []string{"limits.yaml:6 (edge)", "limits.yaml:10 (edge)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("warned of %q, want %q, each once", got, want)
	}
}
