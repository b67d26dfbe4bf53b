package config

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func concurrencyFile(rule string) []byte {
	return []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: concurrency, " + rule + "}\n")
}

// TestConcurrencyRules: a concurrency rule's slots and lease (30 s when it
// gives none); count_refused only as the rule writes it, whatever the
// -count-refused default.
func TestConcurrencyRules(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		o     Options
		lease time.Duration
		cr    bool
	}{
		{rule: "requests_per_unit: 10", lease: DefaultLease},
		{rule: "requests_per_unit: 10, lease: 2m", lease: 2 * time.Minute},
		{rule: "requests_per_unit: 10, lease: 1ms", o: Options{CountRefused: true}, lease: time.Millisecond},
		{rule: "requests_per_unit: 10, count_refused: true", lease: DefaultLease, cr: true},
	} {
		d, err := tc.o.Parse("x.yaml", concurrencyFile(tc.rule))
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		r := d.Descriptors[0].Rules[0]
		want := limits.Limit{Algorithm: limits.Concurrency, Requests: 10, Period: tc.lease, CountRefused: tc.cr}
		if r.Limit != want || r.CountRefused != tc.cr || r.Unit != UnitUnknown {
			t.Errorf("%s: %+v (unit %s), want %+v", tc.rule, r.Limit, r.Unit, want)
		}
	}
}

// TestConcurrencyBad: the errors of a concurrency rule name the file, the
// line and the field.
func TestConcurrencyBad(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{"requests_per_unit: 10, unit: second", "x.yaml:4: unit: concurrency takes no unit (a concurrency limit counts the requests in flight, not hits per unit; lease bounds how long a slot is held)"},
		{"requests_per_unit: 10, unit_multiplier: 2", "x.yaml:4: unit_multiplier: concurrency takes no unit_multiplier (a concurrency limit has no unit; lease bounds how long a slot is held)"},
		{"requests_per_unit: 10, burst: 5", "x.yaml:4: burst: concurrency takes no burst (its slots are requests_per_unit)"},
		{"requests_per_unit: 10, calendar: true", "x.yaml:4: calendar: concurrency takes no calendar (it counts what is held now, in no window)"},
		{"lease: 30s", "x.yaml:4: rate_limit: has no requests_per_unit (the number of slots)"},
		{"requests_per_unit: 10, lease: 30", `x.yaml:4: lease: want a duration such as 30s or 2m, got "30"`},
		{"requests_per_unit: 10, lease: 500us", "x.yaml:4: lease: must be at least 1ms, got 500µs"},
		{"requests_per_unit: 10, lease: 48h", "x.yaml:4: lease: must be at most 24h0m0s, got 48h0m0s"},
		{"requests_per_unit: 10001", "x.yaml:4: requests_per_unit: 10001 is above 10000, the most slots a concurrency limit keeps (one expiry instant per slot)"},
		{"requests_per_unit: 10, leas: 30s", "x.yaml:4: leas: unknown field in a rate limit, did you mean lease?"},
	} {
		_, err := Parse("x.yaml", concurrencyFile(tc.rule))
		checkError(t, tc.rule, err, tc.want)
	}
	_, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, lease: 30s}\n"))
	checkError(t, "lease on a window", err, "x.yaml:4: lease: sliding_window takes no lease (only algorithm: concurrency does)")
	_, err = Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, lease: 30s}\n"))
	checkError(t, "lease on unlimited", err, "x.yaml:4: lease: unlimited with a lease")
}
