package config

import "testing"

func TestCount(t *testing.T) {
	limited, unlimited := &Rule{Name: "r"}, &Rule{Unlimited: true}
	c := &Config{Domains: map[string]*Domain{
		"a": {Name: "a", Descriptors: []*Descriptor{
			{Key: "k", Rules: []*Rule{limited}},
			// Leads only to nested descriptors: not a descriptor with limits.
			{Key: "path", Descriptors: []*Descriptor{
				// A rate_limits list of three, one unlimited.
				{Key: "user", Rules: []*Rule{limited, limited, unlimited}},
				{Key: "ip", Descriptors: []*Descriptor{{Key: "deep", Rules: []*Rule{unlimited}}}},
			}},
		}},
		"b": {Name: "b"},
	}}
	for _, tc := range []struct {
		name string
		got  Counts
		want Counts
		text string
	}{
		{"config", c.Count(), Counts{Domains: 2, Limits: 5, Unlimited: 2, Descriptors: 3}, "2 domains, 5 limits (2 unlimited) on 3 descriptors"},
		{"domain a", c.Domains["a"].Count(), Counts{Domains: 1, Limits: 5, Unlimited: 2, Descriptors: 3}, "1 domain, 5 limits (2 unlimited) on 3 descriptors"},
		{"empty domain", c.Domains["b"].Count(), Counts{Domains: 1}, "1 domain, 0 limits (0 unlimited) on 0 descriptors"},
		{"one limit", (&Domain{Descriptors: []*Descriptor{{Key: "k", Rules: []*Rule{limited}}}}).Count(), Counts{Domains: 1, Limits: 1, Descriptors: 1}, "1 domain, 1 limit (0 unlimited) on 1 descriptor"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, tc.got, tc.want)
		}
		if s := tc.got.String(); s != tc.text {
			t.Errorf("%s: String() = %q, want %q", tc.name, s, tc.text)
		}
	}
}
