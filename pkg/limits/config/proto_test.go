package config

import (
	"strings"
	"testing"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// protoEquivalent is a file that a RateLimitConfig can say in full: every
// field the message has, nested descriptors, wildcards.
const protoEquivalent = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unlimited: true}
  - key: to_cluster
    value: mongo_cluster
    descriptors:
      - key: from_cluster
        value: "*"
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/*
    shadow_mode: true
    rate_limit: {name: api, unit: hour, requests_per_unit: 600}
  - key: path
    value: /api/admin/*
    rate_limit:
      name: admin
      unit: day
      requests_per_unit: 60
      replaces: [{name: api}]
`

func protoMessage() *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{
		Name:   "edge-limits",
		Domain: "edge",
		Descriptors: []*rlsconfv3.RateLimitDescriptor{
			{Key: "remote_address", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 10}},
			{Key: "remote_address", Value: "50.0.0.5", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
			{Key: "to_cluster", Value: "mongo_cluster", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "from_cluster", Value: "*", DetailedMetric: true, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 100}},
			}},
			{Key: "path", Value: "/api/*", ShadowMode: true, RateLimit: &rlsconfv3.RateLimitPolicy{Name: "api", Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 600}},
			{Key: "path", Value: "/api/admin/*", RateLimit: &rlsconfv3.RateLimitPolicy{
				Name: "admin", Unit: rlsconfv3.RateLimitUnit_DAY, RequestsPerUnit: 60,
				Replaces: []*rlsconfv3.RateLimitReplace{{Name: "api"}},
			}},
		},
	}
}

// A message and the file that says the same give the same Domain, but for
// where it came from: File is the resource, and a message has no lines.
func TestFromProtoEqualsYAML(t *testing.T) {
	fromFile, err := Parse("edge.yaml", []byte(protoEquivalent))
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := FromProto("edge-limits", protoMessage())
	if err != nil {
		t.Fatal(err)
	}
	if fromProto.File != "edge-limits" {
		t.Errorf("File: got %q, want the resource, edge-limits", fromProto.File)
	}
	fromFile.File = fromProto.File
	clearLines(fromFile.Descriptors)
	checkModel(t, "edge", fromProto, fromFile)

	files := &Config{Domains: map[string]*Domain{fromFile.Name: fromFile}}
	protos := &Config{Domains: map[string]*Domain{fromProto.Name: fromProto}}
	checkModel(t, "Lines", protos.Lines(), files.Lines())
}

func clearLines(ds []*Descriptor) {
	for _, d := range ds {
		d.Line = 0
		for _, r := range d.Rules {
			r.Line = 0
		}
		clearLines(d.Descriptors)
	}
}

// The validator gives a message the errors it gives a file, with the
// field's path where the file's error has a line and a field name.
func TestFromProtoErrors(t *testing.T) {
	rule := func(p *rlsconfv3.RateLimitPolicy) *rlsconfv3.RateLimitConfig {
		return &rlsconfv3.RateLimitConfig{Domain: "a", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: p}}}
	}
	for _, tc := range []struct {
		name      string
		yaml      string
		message   *rlsconfv3.RateLimitConfig
		fileError string
		msgError  string
	}{
		{
			"no domain", "descriptors: []\n", &rlsconfv3.RateLimitConfig{},
			"x.yaml:1: no domain", "res: no domain",
		},
		{
			"no key", "domain: a\ndescriptors:\n  - value: v\n",
			&rlsconfv3.RateLimitConfig{Domain: "a", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Value: "v"}}},
			"x.yaml:3: descriptor has no key", "res: descriptors[0]: descriptor has no key",
		},
		{
			"no unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n",
			rule(&rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1}),
			"x.yaml:4: rate_limit: has no unit", "res: descriptors[0].rate_limit: has no unit",
		},
		{
			"unknown unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: \"9\", requests_per_unit: 1}\n",
			rule(&rlsconfv3.RateLimitPolicy{Unit: 9, RequestsPerUnit: 1}),
			`x.yaml:4: unit: want second, minute, hour, day, week, month or year, got "9"`,
			`res: descriptors[0].rate_limit.unit: want second, minute, hour, day, week, month or year, got "9"`,
		},
		{
			"unlimited with a unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
			rule(&rlsconfv3.RateLimitPolicy{Unlimited: true, Unit: rlsconfv3.RateLimitUnit_SECOND}),
			"x.yaml:4: unit: unlimited with a unit", "res: descriptors[0].rate_limit.unit: unlimited with a unit",
		},
		{
			"replaces itself", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      {name: n, unit: second, requests_per_unit: 1, replaces: [{name: n}]}\n",
			rule(&rlsconfv3.RateLimitPolicy{Name: "n", Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1, Replaces: []*rlsconfv3.RateLimitReplace{{Name: "n"}}}),
			`x.yaml:5: replaces: cannot replace the limit's own name "n"`,
			`res: descriptors[0].rate_limit.replaces[0]: cannot replace the limit's own name "n"`,
		},
		{
			"replaces without a name", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n",
			rule(&rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1, Replaces: []*rlsconfv3.RateLimitReplace{{}}}),
			"x.yaml:4: replaces: entry without a name", "res: descriptors[0].rate_limit.replaces[0]: entry without a name",
		},
		{
			"duplicate descriptor", "domain: a\ndescriptors:\n  - key: k\n  - key: k\n",
			&rlsconfv3.RateLimitConfig{Domain: "a", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k"}, {Key: "k"}}},
			"x.yaml:4: a.k: duplicate descriptor, first at line 3", "res: descriptors[1] (a.k): duplicate descriptor, first at descriptors[0]",
		},
		{
			"nested", "domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        rate_limit: {requests_per_unit: 3}\n",
			&rlsconfv3.RateLimitConfig{Domain: "a", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "j", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 3}},
			}}}},
			"x.yaml:6: rate_limit: has no unit", "res: descriptors[0].descriptors[0].rate_limit: has no unit",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.yaml))
			checkError(t, "Parse", err, tc.fileError)
			_, err = FromProto("res", tc.message)
			checkError(t, "FromProto", err, tc.msgError)
		})
	}
}

// requests_per_unit 0 is a block rule in a message as in a file, where
// proto3 cannot tell it from a missing field: a snapshot of Envoy
// Gateway's requests: 0 loads rather than being NACKed.
func TestFromProtoBlockRule(t *testing.T) {
	rule := func(p *rlsconfv3.RateLimitPolicy) *rlsconfv3.RateLimitConfig {
		return &rlsconfv3.RateLimitConfig{Domain: "a", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: p}}}
	}
	d, err := FromProto("res", rule(&rlsconfv3.RateLimitPolicy{Name: "closed", Unit: rlsconfv3.RateLimitUnit_MINUTE}))
	if err != nil {
		t.Fatalf("FromProto: %v", err)
	}
	f, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {name: closed, unit: minute, requests_per_unit: 0}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for what, d := range map[string]*Domain{"message": d, "file": f} {
		var r *Rule
		if rs := d.Descriptors[0].Rules; len(rs) == 1 {
			r = rs[0]
		}
		if r == nil || !r.Limit.Blocks() || r.Limit.Period != time.Minute || r.Name != "closed" {
			t.Errorf("%s: got rule %+v, want the block rule closed, 0 per minute", what, r)
		}
	}
	if _, err := FromProto("res", rule(&rlsconfv3.RateLimitPolicy{})); err == nil || !strings.Contains(err.Error(), "has no unit") {
		t.Errorf("FromProto of an empty rate_limit: got %v, want has no unit", err)
	}
}

// Options apply to a message as to a file; a nil message has no domain.
func TestFromProtoOptions(t *testing.T) {
	if _, err := FromProto("res", nil); err == nil {
		t.Error("FromProto(nil): got no error, want no domain")
	}
	d, err := Options{MaxDelay: 0}.FromProto("res", protoMessage())
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Descriptors[0].Rules[0].Limit.Algorithm.String(); got != "sliding_window" {
		t.Errorf("algorithm: got %s, want the file's default, sliding_window", got)
	}
}
