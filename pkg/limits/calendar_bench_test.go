package limits_test

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// BenchmarkWindowFrame is what finding a window costs a decision: a plain
// window's, and a calendar month's in Europe/Berlin (the frame kept from
// the last decision of the same window; a few time.Date calls, each with
// its zone's lookup, when it must be found afresh).
func BenchmarkWindowFrame(b *testing.B) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC).UnixMicro()
	plain := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: 30 * 24 * time.Hour}
	month := calendarLimit(b, limits.FixedWindow, 10, limits.CalendarMonth, "Europe/Berlin")
	for _, bc := range []struct {
		name string
		l    limits.Limit
	}{{"plain", plain}, {"calendar_month", month}} {
		b.Run(bc.name, func(b *testing.B) {
			for i := range b.N {
				limits.WindowFrame(bc.l, now+int64(i))
			}
		})
	}
}
