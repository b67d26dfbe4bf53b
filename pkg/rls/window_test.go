package rls

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// windowLimits are calendar quotas whose windows' lengths vary: a month in
// Berlin, a day in New York.
const windowLimits = `
domain: edge
descriptors:
  - key: plan
    rate_limit: {name: monthly, unit: month, requests_per_unit: 10, calendar: true, time_zone: Europe/Berlin}
  - key: user
    rate_limit: {name: daily, unit: day, requests_per_unit: 10, calendar: true, time_zone: America/New_York}
`

// TestCalendarWindowReported: the window a calendar limit's answer reports
// is the calendar window's real length at the decision's instant, in the
// IETF RateLimit-Policy's w and in explain's period_seconds: a December of
// 31 days, a February of 28 or 29, a New York day of 23 or 25 hours across
// DST; never the unit's nominal 30 days or 24 hours.
func TestCalendarWindowReported(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(windowLimits))
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	store := memory.New(memory.Options{Now: clock.Load, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{
		Store: store, Headers: []HeaderDialect{IETFHeaders},
		Now: func() time.Time { return time.UnixMicro(clock.Load()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	zone := func(name string) *time.Location {
		z, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	berlin, newYork := zone("Europe/Berlin"), zone("America/New_York")
	const day = 86400
	for _, tc := range []struct {
		name   string
		at     time.Time
		key    string
		policy string
		window int64
	}{
		{"December", time.Date(2026, 12, 7, 15, 0, 0, 0, berlin), "plan", "monthly", 31 * day},
		{"February", time.Date(2027, 2, 14, 15, 0, 0, 0, berlin), "plan", "monthly", 28 * day},
		{"February of a leap year", time.Date(2028, 2, 14, 15, 0, 0, 0, berlin), "plan", "monthly", 29 * day},
		{"a spring-forward day", time.Date(2026, 3, 8, 12, 0, 0, 0, newYork), "user", "daily", 23 * 3600},
		{"a fall-back day", time.Date(2026, 11, 1, 12, 0, 0, 0, newYork), "user", "daily", 25 * 3600},
	} {
		clock.Store(tc.at.UnixMicro())
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(tc.key, "k")}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := fmt.Sprintf("RateLimit-Policy: %q;q=10;w=%d", tc.policy, tc.window)
		if got := headerList(resp); !slices.Contains(got, want) {
			t.Errorf("%s: headers %s, want %s", tc.name, strings.Join(got, "; "), want)
		}
		ex := explain(t, svc, "edge", tc.key, "k")
		if got := ex.Limits[0].PeriodSeconds; got != tc.window {
			t.Errorf("%s: explain's period_seconds %d, want %d", tc.name, got, tc.window)
		}
		if c := ex.Limits[0].Calendar; c == nil || c.Length != (time.Duration(tc.window)*time.Second).String() {
			t.Errorf("%s: explain's calendar %+v, want a window of %ds", tc.name, c, tc.window)
		}
	}
}
