package config

import (
	"slices"
	"strings"
	"testing"
)

func warnFile(rule string) []byte {
	return []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {" + rule + "}\n")
}

// TestWarnAt: warn_at's thresholds as written, on every kind of limit
// with room; a rule without one has none, and its /rlconfig line is
// unchanged.
func TestWarnAt(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want []float64
		line string
	}{
		{"unit: second, requests_per_unit: 10", nil, "a.k: sliding_window 10/1s shadow_mode=false"},
		{"unit: second, requests_per_unit: 10, warn_at: ~", nil, "a.k: sliding_window 10/1s shadow_mode=false"},
		{"unit: day, requests_per_unit: 1000, warn_at: [0.5, .8, 0.95]", []float64{0.5, 0.8, 0.95},
			"a.k: sliding_window 1000/24h0m0s shadow_mode=false warn_at=0.5,0.8,0.95"},
		{"algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20, warn_at: [0.9]", []float64{0.9},
			"a.k: token_bucket 10/1s burst=20 shadow_mode=false warn_at=0.9"},
		{"algorithm: concurrency, requests_per_unit: 10, warn_at: [0.7]", []float64{0.7},
			"a.k: concurrency 10 lease=30s shadow_mode=false warn_at=0.7"},
		{"algorithm: leaky_bucket, unit: second, requests_per_unit: 10, burst: 5, warn_at: [0.6]", []float64{0.6},
			"a.k: leaky_bucket 10/1s burst=5 shadow_mode=false warn_at=0.6"},
	} {
		d, err := Parse("x.yaml", warnFile(tc.rule))
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		if got := d.Descriptors[0].Rules[0].WarnAt; !slices.Equal(got, tc.want) {
			t.Errorf("%s: warn_at %v, want %v", tc.rule, got, tc.want)
		}
		c := &Config{Domains: map[string]*Domain{"a": d}}
		if got := strings.Join(c.Lines(), "\n"); got != tc.line {
			t.Errorf("%s: /rlconfig line\ngot  %s\nwant %s", tc.rule, got, tc.line)
		}
	}
}

// TestWarnAtBad: a threshold that is no fraction of the limit, out of
// order, too many of them, or on a limit without room is refused at
// load, with the file, the line and the field.
func TestWarnAtBad(t *testing.T) {
	const window = "unit: second, requests_per_unit: 10, "
	for _, tc := range []struct{ rule, want string }{
		{window + "warn_at: 0.8", `x.yaml:4: warn_at: want a list of fractions of the limit such as [0.5, 0.8], got 0.8`},
		{window + "warn_at: {a: 1}", `x.yaml:4: warn_at: want a list of fractions of the limit such as [0.5, 0.8], got a mapping`},
		{window + "warn_at: []", "x.yaml:4: warn_at: empty list (leave warn_at out for no thresholds)"},
		{window + `warn_at: ["0.5"]`, `x.yaml:4: warn_at: want a fraction of the limit such as 0.8, got "0.5"`},
		{window + "warn_at: [50%]", `x.yaml:4: warn_at: want a fraction of the limit such as 0.8, got "50%"`},
		{window + "warn_at: [[0.5]]", `x.yaml:4: warn_at: want a fraction of the limit such as 0.8, got a list`},
		{window + "warn_at: [0]", "x.yaml:4: warn_at: 0 is not a fraction of the limit: want a number above 0 and below 1"},
		{window + "warn_at: [1]", "x.yaml:4: warn_at: 1 is not a fraction of the limit: want a number above 0 and below 1"},
		{window + "warn_at: [0.5, 1.2]", "x.yaml:4: warn_at: 1.2 is not a fraction of the limit: want a number above 0 and below 1"},
		{window + "warn_at: [-0.5]", "x.yaml:4: warn_at: -0.5 is not a fraction of the limit: want a number above 0 and below 1"},
		{window + "warn_at: [.nan]", "x.yaml:4: warn_at: NaN is not a fraction of the limit: want a number above 0 and below 1"},
		{window + "warn_at: [0.8, 0.5]", "x.yaml:4: warn_at: 0.5 after 0.8: list the thresholds in ascending order, each once"},
		{window + "warn_at: [0.5, 0.5]", "x.yaml:4: warn_at: 0.5 after 0.5: list the thresholds in ascending order, each once"},
		{window + "warn_at: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]", "x.yaml:4: warn_at: 6 thresholds, more than 5"},
		{"unit: second, requests_per_unit: 0, warn_at: [0.5]", "x.yaml:4: warn_at: a limit with no room (sliding_window 0/1s) has no usage to warn of"},
		{"algorithm: leaky_bucket, unit: second, requests_per_unit: 10, warn_at: [0.5]", "x.yaml:4: warn_at: a limit with no room (leaky_bucket 10/1s burst=0) has no usage to warn of"},
		{"unlimited: true, warn_at: [0.5]", "x.yaml:4: warn_at: unlimited with warn_at"},
		{window + "warn_a: [0.5]", "x.yaml:4: warn_a: unknown field in a rate limit, did you mean warn_at?"},
	} {
		_, err := Parse("x.yaml", warnFile(tc.rule))
		checkError(t, tc.rule, err, tc.want)
	}
	// A list written as a block is reported at its first item.
	block := "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n      warn_at:\n        - 0.5\n        - 2\n"
	_, err := Parse("x.yaml", []byte(block))
	checkError(t, "block list", err, "x.yaml:8: warn_at: 2 is not a fraction of the limit: want a number above 0 and below 1")
}
