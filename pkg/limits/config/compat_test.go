package config

import "testing"

// envoyproxy/ratelimit ignores requests_per_unit beside unlimited; its files
// must load here unchanged.
func TestUnlimitedIgnoresRequestsPerUnit(t *testing.T) {
	d, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, requests_per_unit: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := d.Descriptors[0].Rules[0]
	if !r.Unlimited || r.Limit.Requests != 0 {
		t.Errorf("rule = %+v, want unlimited with no limit", r)
	}
}
