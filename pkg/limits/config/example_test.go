package config_test

import (
	"errors"
	"fmt"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func ExampleParse() {
	d, err := config.Parse("limits.yaml", []byte(`
domain: api
descriptors:
  - key: path
    value: /users/*
    rate_limit:
      algorithm: token_bucket
      unit: second
      requests_per_unit: 10
      burst: 20
  - key: remote_address
    rate_limit:
      unit: minute
      unit_multiplier: 5
      requests_per_unit: 300
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := &config.Config{Domains: map[string]*config.Domain{d.Name: d}}
	for _, line := range c.Lines() {
		fmt.Println(line)
	}
	// Output:
	// api.path_/users/*: token_bucket 10/1s burst=20 shadow_mode=false
	// api.remote_address: sliding_window 300/5m0s shadow_mode=false
}

// A rate_limits list puts several limits on one descriptor; Lines tells them
// apart by their index in the list.
func ExampleParse_rateLimits() {
	d, err := config.Parse("limits.yaml", []byte(`
domain: edge
descriptors:
  - key: user
    rate_limits:
      - unit: second
        requests_per_unit: 10
      - algorithm: fixed_window
        unit: day
        requests_per_unit: 10000
        count_refused: true
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := &config.Config{Domains: map[string]*config.Domain{d.Name: d}}
	for _, line := range c.Lines() {
		fmt.Println(line)
	}
	// Output:
	// edge.user[0]: sliding_window 10/1s shadow_mode=false
	// edge.user[1]: fixed_window 10000/24h0m0s shadow_mode=false count_refused=true
}

// Options carry the -max-delay flag: a leaky_bucket that may delay a request
// longer is refused.
func ExampleOptions_Parse() {
	file := []byte(`
domain: api
descriptors:
  - key: user
    rate_limit:
      algorithm: leaky_bucket
      unit: second
      requests_per_unit: 10
      burst: 20
`)
	_, err := config.Parse("limits.yaml", file)
	fmt.Println(err)
	_, err = config.Options{MaxDelay: 2 * time.Second}.Parse("limits.yaml", file)
	fmt.Println(err)
	// Output:
	// limits.yaml:9: burst: a leaky_bucket of 10 per second with burst 20 may delay a request 2s, above -max-delay 1s
	// <nil>
}

func ExampleError() {
	_, err := config.Parse("limits.yaml", []byte(`
domain: api
descriptors:
  - key: remote_address
    rate_limti:
      unit: second
      requests_per_unit: 10
`))
	fmt.Println(err)
	if e, ok := errors.AsType[*config.Error](err); ok {
		fmt.Printf("line %d, word %q\n", e.Line, e.Word)
	}
	// Output:
	// limits.yaml:5: rate_limti: unknown field in a descriptor, did you mean rate_limit?
	// line 5, word "rate_limti"
}

// A RateLimitConfig from an xDS server is checked as a file is; its errors
// name the resource and the field's path.
func ExampleFromProto() {
	msg := &rlsconfv3.RateLimitConfig{
		Name:   "api-limits",
		Domain: "api",
		Descriptors: []*rlsconfv3.RateLimitDescriptor{
			{Key: "remote_address", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 300}},
			{Key: "user", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 10}},
		},
	}
	_, err := config.FromProto(msg.GetName(), msg)
	fmt.Println(err)

	msg.Descriptors = msg.Descriptors[:1]
	d, _ := config.FromProto(msg.GetName(), msg)
	c := &config.Config{Domains: map[string]*config.Domain{d.Name: d}}
	fmt.Println(c.Lines())
	// Output:
	// api-limits: descriptors[1].rate_limit: has no unit
	// [api.remote_address: sliding_window 300/1m0s shadow_mode=false]
}
