package rlqs

import (
	"math"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TestCalendarRate: a calendar quota divides at N over the real length of
// its window now: February 2024 in New York is 29 days, March 31 days less
// the hour DST takes; the smaller rate of a list wins as for any limit.
func TestCalendarRate(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(`domain: billing
descriptors:
  - key: plan
    rate_limits:
      - {unit: month, requests_per_unit: 29000, calendar: true, time_zone: America/New_York}
      - {unit: second, requests_per_unit: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	ix := descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}})
	end, _, _, _ := ix.MatchSet("billing", []descriptors.Entry{{Key: "plan", Value: "pro"}}, nil, nil)
	if end == nil {
		t.Fatal("no match")
	}
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		at   time.Time
		want float64
	}{
		{time.Date(2024, 2, 10, 12, 0, 0, 0, ny), 29000.0 / (29 * 86400)},
		{time.Date(2024, 3, 20, 12, 0, 0, 0, ny), 29000.0 / (31*86400 - 3600)},
	} {
		rate, k := limitRate(end, tc.at)
		if k != divided || math.Abs(rate-tc.want) > 1e-12 {
			t.Errorf("at %s: rate %v (%v), want %v", tc.at, rate, k, tc.want)
		}
	}
}
