package config

import (
	"testing"
	"time"
)

// TestBlockFor: block_for loads into Limit.BlockFor, and every way to get
// it wrong names the file, the line and the field.
func TestBlockFor(t *testing.T) {
	body := func(rule string) []byte {
		return []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {" + rule + "}\n")
	}
	d, err := Parse("x.yaml", body("unit: minute, requests_per_unit: 5, algorithm: fixed_window, block_for: 15m"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Descriptors[0].Rules[0].Limit.BlockFor; got != 15*time.Minute {
		t.Fatalf("block_for 15m loaded as %s", got)
	}
	for _, tc := range []struct{ name, rule, want string }{
		{"a number", "unit: minute, requests_per_unit: 5, block_for: 15", "x.yaml:4: block_for: want a duration such as 15m or 90s, got 15"},
		{"not a duration", "unit: minute, requests_per_unit: 5, block_for: soon", `x.yaml:4: block_for: want a duration such as 15m or 90s, got "soon"`},
		{"zero", "unit: minute, requests_per_unit: 5, block_for: 0s", "x.yaml:4: block_for: must be positive, got 0s"},
		{"negative", "unit: minute, requests_per_unit: 5, block_for: -1m", "x.yaml:4: block_for: must be positive, got -1m"},
		{"under a millisecond", "unit: minute, requests_per_unit: 5, block_for: 10us", "x.yaml:4: block_for: 10µs is shorter than a millisecond"},
		{"too long", "unit: minute, requests_per_unit: 5, block_for: 100000h", "x.yaml:4: block_for: 100000h0m0s is longer than the maximum 87600h0m0s"},
		{"block rule", "unit: minute, requests_per_unit: 0, block_for: 1m", "x.yaml:4: block_for: is not for a block rule (requests_per_unit 0 refuses every request already)"},
		{"leaky bucket", "unit: minute, requests_per_unit: 5, algorithm: leaky_bucket, block_for: 1m", "x.yaml:4: block_for: is not for a leaky_bucket, whose refusals depend on each caller's deadline: use token_bucket or a window"},
		{"concurrency", "requests_per_unit: 5, algorithm: concurrency, block_for: 1m", "x.yaml:4: block_for: concurrency takes no block_for (its refusals say how many requests are in flight, not what a client did)"},
		{"unlimited", "unlimited: true, block_for: 1m", "x.yaml:4: block_for: unlimited with block_for"},
		{"typo", "unit: minute, requests_per_unit: 5, block_fro: 1m", "x.yaml:4: block_fro: unknown field in a rate limit, did you mean block_for?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", body(tc.rule))
			checkError(t, "Parse", err, tc.want)
		})
	}
}
