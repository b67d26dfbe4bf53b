package config

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// The default algorithm and count_refused apply to every limit that does
// not say its own, from a file and from a RateLimitConfig alike; a limit
// that says its own keeps it.
func TestDefaultAlgorithmAndCountRefused(t *testing.T) {
	const file = `domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 10, count_refused: false}
`
	dropIn := Options{DefaultAlgorithm: limits.FixedWindow, CountRefused: true}
	for _, tt := range []struct {
		opts Options
		want []limits.Limit
	}{
		{DefaultOptions(), []limits.Limit{
			{Algorithm: limits.SlidingWindow, Requests: 10, Period: 1e9},
			{Algorithm: limits.TokenBucket, Requests: 10, Period: 1e9, Burst: 10},
			{Algorithm: limits.SlidingWindow, Requests: 10, Period: 1e9},
		}},
		{dropIn, []limits.Limit{
			{Algorithm: limits.FixedWindow, Requests: 10, Period: 1e9, CountRefused: true},
			{Algorithm: limits.TokenBucket, Requests: 10, Period: 1e9, Burst: 10, CountRefused: true},
			{Algorithm: limits.FixedWindow, Requests: 10, Period: 1e9},
		}},
	} {
		d, err := tt.opts.Parse("limits.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range tt.want {
			r := d.Descriptors[i].Rules[0]
			if r.Limit != want || r.CountRefused != want.CountRefused {
				t.Errorf("%+v: descriptor %d: %v (count_refused %t), want %v", tt.opts, i, r.Limit, r.CountRefused, want)
			}
		}
	}
	// Over xDS no limit can name an algorithm: every one takes the default.
	d, err := dropIn.FromProto("edge-limits", protoMessage())
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Descriptors[0].Rules[0].Limit; l.Algorithm != limits.FixedWindow || !l.CountRefused {
		t.Errorf("from a RateLimitConfig: %v, want fixed_window count_refused", l)
	}
	d, err = Options{DefaultAlgorithm: limits.SlidingWindow}.FromProto("edge-limits", protoMessage())
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Descriptors[0].Rules[0].Limit; l.Algorithm != limits.SlidingWindow || l.CountRefused {
		t.Errorf("RLS_DEFAULT_ALGORITHM=sliding_window over xDS: %v", l)
	}
}
