package config

import (
	"testing"
	"time"
)

// TestSyncInterval: sync_interval loads into Limit.SyncInterval on the
// algorithms that take it, and every way to get it wrong names the file,
// the line and the field.
func TestSyncInterval(t *testing.T) {
	body := func(rule string) []byte {
		return []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {" + rule + "}\n")
	}
	for _, algo := range []string{"fixed_window", "sliding_window", "token_bucket"} {
		d, err := Parse("x.yaml", body("unit: second, requests_per_unit: 5, algorithm: "+algo+", sync_interval: 10ms"))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Descriptors[0].Rules[0].Limit.SyncInterval; got != 10*time.Millisecond {
			t.Fatalf("%s: sync_interval 10ms loaded as %s", algo, got)
		}
	}
	for _, tc := range []struct{ name, rule, want string }{
		{"a number", "unit: second, requests_per_unit: 5, sync_interval: 10", "x.yaml:4: sync_interval: want a duration such as 15m or 90s, got 10"},
		{"zero", "unit: second, requests_per_unit: 5, sync_interval: 0s", "x.yaml:4: sync_interval: must be positive, got 0s"},
		{"under a millisecond", "unit: second, requests_per_unit: 5, sync_interval: 900us", "x.yaml:4: sync_interval: 900µs is shorter than 1ms"},
		{"above the period", "unit: second, requests_per_unit: 5, sync_interval: 2s", "x.yaml:4: sync_interval: 2s is longer than the limit's period 1s"},
		{"sliding log", "unit: second, requests_per_unit: 5, algorithm: sliding_log, sync_interval: 10ms", "x.yaml:4: sync_interval: is for fixed_window, sliding_window and token_bucket only, not sliding_log"},
		{"leaky bucket", "unit: second, requests_per_unit: 5, algorithm: leaky_bucket, burst: 2, sync_interval: 10ms", "x.yaml:4: sync_interval: is for fixed_window, sliding_window and token_bucket only, not leaky_bucket"},
		{"concurrency", "requests_per_unit: 5, algorithm: concurrency, sync_interval: 10ms", "x.yaml:4: sync_interval: concurrency takes no sync_interval (a slot must be taken and given back where every instance sees it)"},
		{"block rule", "unit: second, requests_per_unit: 0, sync_interval: 10ms", "x.yaml:4: sync_interval: is not for a block rule (requests_per_unit 0 refuses every request without asking Redis)"},
		{"lockout", "unit: minute, requests_per_unit: 5, block_for: 1m, sync_interval: 10ms", "x.yaml:4: sync_interval: is not for a lockout (block_for): a lock must refuse on every instance at once"},
		{"unlimited", "unlimited: true, sync_interval: 10ms", "x.yaml:4: sync_interval: unlimited with sync_interval"},
		{"typo", "unit: second, requests_per_unit: 5, sync_intervall: 10ms", "x.yaml:4: sync_intervall: unknown field in a rate limit, did you mean sync_interval?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", body(tc.rule))
			checkError(t, "Parse", err, tc.want)
		})
	}
}
