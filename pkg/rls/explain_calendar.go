package rls

import (
	"fmt"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// ExplainedCalendar is the calendar window a calendar limit counts in at
// the instant explained: its bounds in the limit's zone. The stores decide
// on their own clock (Redis's, with Redis), which may differ from this
// instance's by its skew: within that of a boundary, the window shown may
// be the one either side.
type ExplainedCalendar struct {
	// Unit is day, week, month or year; TimeZone the IANA zone.
	Unit     string `json:"unit"`
	TimeZone string `json:"time_zone"`
	// Start and End bound the window, RFC 3339 in the zone; End is the next
	// boundary, where a fixed window starts over.
	Start string `json:"start"`
	End   string `json:"end"`
	// Length is the window's real length (a 23-hour day, a 29-day month).
	Length string `json:"length"`
}

// explainCalendar is l's calendar window at now, nil for a limit without
// a calendar.
func explainCalendar(l limits.Limit, now time.Time) *ExplainedCalendar {
	c := l.Calendar
	if !c.On() {
		return nil
	}
	f := limits.WindowFrame(l, now.UnixMicro())
	at := func(us int64) string { return time.UnixMicro(us).In(c.Zone).Format(time.RFC3339) }
	return &ExplainedCalendar{
		Unit:     c.Unit.String(),
		TimeZone: c.Zone.String(),
		Start:    at(f.Start),
		End:      at(f.End),
		Length:   (time.Duration(f.Len()) * time.Microsecond).String(),
	}
}

// writeCalendar writes a calendar limit's window line.
func writeCalendar(b *strings.Builder, c *ExplainedCalendar) {
	if c == nil {
		return
	}
	fmt.Fprintf(b, "      window: calendar %s in %s, %s to %s (%s)\n", c.Unit, c.TimeZone, c.Start, c.End, c.Length)
}
