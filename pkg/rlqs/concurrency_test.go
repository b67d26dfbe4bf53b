package rlqs

import (
	"reflect"
	"testing"
	"time"

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
// and Unenforced names the concurrency rules for the load's warning.
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
	got := Unenforced(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	want := []string{"limits.yaml:6 (edge)", "limits.yaml:10 (edge)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unenforced = %q, want %q", got, want)
	}
}
