package descriptors_test

import (
	"fmt"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func ExampleIndex_Match() {
	d, err := config.Parse("limits.yaml", []byte(`
domain: edge
descriptors:
  - key: path
    value: /api/*
    descriptors:
      - key: user
        rate_limit: {name: api-per-user, unit: minute, requests_per_unit: 100}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	entries := []descriptors.Entry{{Key: "path", Value: "/api/items"}, {Key: "user", Value: "bob"}}
	node, _, _ := ix.Match("edge", entries, nil)
	fmt.Println(node.Path, node.Descriptor.Rules[0].Name)
	// Output: path_/api/*.user api-per-user
}

func ExampleKey() {
	fmt.Println(descriptors.Key(descriptors.KeyInput{
		Domain:  "edge",
		Entries: []descriptors.Entry{{Key: "user", Value: "bob"}},
		Limit:   limits.Limit{Algorithm: limits.SlidingWindow, Requests: 100, Period: time.Minute},
	}))
	// Output: rls:{38069ecf24798877}:sw:60000000:0:4:edge4:user3:bob
}
