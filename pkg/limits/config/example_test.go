package config_test

import (
	"errors"
	"fmt"

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
