package xds

import (
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// gatewayStyle is a snapshot written the way Envoy Gateway writes what it
// serves: protobuf JSON with the .proto's field names and every field, in
// YAML, including fields that this build's RateLimitConfig lacks, at their
// zero values.
const gatewayStyle = `
name: default/eg/http
domain: default/eg/http
descriptors:
  - key: httproute/default/backend/rule/0/match/0
    value: httproute/default/backend/rule/0/match/0
    rate_limit: null
    descriptors:
      - key: rule-0-match-0
        value: ""
        rate_limit:
          requests_per_unit: 3
          unit: HOUR
          unlimited: false
          name: ""
          replaces: []
        descriptors: []
        shadow_mode: false
        quota_mode: false
        detailed_metric: false
        value_to_metric: false
        share_threshold: false
    shadow_mode: false
    quota_mode: false
    detailed_metric: false
    value_to_metric: false
    share_threshold: false
`

func gatewayStyleMessage() *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key:   "httproute/default/backend/rule/0/match/0",
		Value: "httproute/default/backend/rule/0/match/0",
		Descriptors: []*rlsconfv3.RateLimitDescriptor{{
			Key:       "rule-0-match-0",
			RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 3, Unit: rlsconfv3.RateLimitUnit_HOUR},
		}},
	}}}
}

func TestParseDump(t *testing.T) {
	one := `{"name": "edge", "domain": "api", "descriptors": [{"key": "path", "rateLimit": {"unit": "SECOND", "requestsPerUnit": 5}}]}`
	edge := limit("edge", "api", "path", 5, rlsconfv3.RateLimitUnit_SECOND)
	for _, tc := range []struct {
		name string
		in   string
		want []*rlsconfv3.RateLimitConfig
	}{
		{"one in JSON", one, []*rlsconfv3.RateLimitConfig{edge}},
		{"a list in JSON", "[" + one + "," + strings.Replace(one, `"edge", "domain": "api"`, `"web", "domain": "web"`, 1) + "]",
			[]*rlsconfv3.RateLimitConfig{edge, limit("web", "web", "path", 5, rlsconfv3.RateLimitUnit_SECOND)}},
		{"an Any's @type", strings.Replace(one, "{", `{"@type": "`+TypeURL+`", `, 1), []*rlsconfv3.RateLimitConfig{edge}},
		{"Envoy Gateway's form, in YAML", gatewayStyle, []*rlsconfv3.RateLimitConfig{gatewayStyleMessage()}},
		{"a YAML list", "- " + strings.ReplaceAll(strings.TrimPrefix(gatewayStyle, "\n"), "\n", "\n  "), []*rlsconfv3.RateLimitConfig{gatewayStyleMessage()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDump([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d resources, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("[%d]: got %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseDumpErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty: want a RateLimitConfig or a list of them"},
		{"a scalar", "5", "want a RateLimitConfig (a mapping) or a list of them, got int"},
		{"a list of scalars", "[5]", "[0]: want a RateLimitConfig (a mapping), got 5"},
		{"a set field this build lacks", `{"name": "edge", "domain": "api", "descriptors": [{"key": "k", "value_to_metric": true}]}`,
			"[0] (edge): descriptors[0].value_to_metric: unknown field (known: key, value, rate_limit, descriptors, shadow_mode, detailed_metric, quota_mode, metadata)"},
		{"a typo", `{"domain": "api", "descriptor": [{"key": "k"}]}`, "[0]: descriptor: unknown field (known: name, domain, descriptors)"},
		{"another type", `{"@type": "type.googleapis.com/x.Y", "domain": "api"}`, "[0]: @type: want " + TypeURL + ", got type.googleapis.com/x.Y"},
		{"an enum name in the wrong case", `{"domain": "api", "descriptors": [{"key": "k", "rate_limit": {"unit": "second", "requests_per_unit": 1}}]}`,
			`[0]: descriptors[0].rate_limit.unit: want SECOND, MINUTE, HOUR, DAY`},
		{"a number for a string, from YAML", "domain: api\ndescriptors:\n  - key: port\n    value: 8080\n", "[0]: descriptors[0].value: want a string, got 8080"},
		{"a negative count", `{"domain": "api", "descriptors": [{"key": "k", "rate_limit": {"unit": "SECOND", "requests_per_unit": -1}}]}`,
			"[0]: descriptors[0].rate_limit.requests_per_unit: want a whole number from 0 to 4294967295, got -1"},
		{"a mapping for a list", `{"domain": "api", "descriptors": {"key": "k"}}`, "[0]: descriptors: want a list, got a mapping"},
		{"not YAML", "{", "neither JSON nor YAML: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDump([]byte(tc.in))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want %s", err, tc.want)
			}
		})
	}
}
