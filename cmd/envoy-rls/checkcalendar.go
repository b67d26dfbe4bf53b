package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// writeCalendars lists the calendar limits of c, one line each, with the
// window each is in at now, so that a zone or unit written wrong shows
// before it counts: "  calendar: billing.plan: month in Europe/Berlin,
// now 2026-12-01T00:00:00+01:00 to 2027-01-01T00:00:00+01:00".
func writeCalendars(w io.Writer, c *config.Config, now time.Time) {
	var lines []string
	for _, d := range c.Domains {
		lines = calendarLines(lines, d.Name, d.Descriptors, now)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func calendarLines(lines []string, parent string, ds []*config.Descriptor, now time.Time) []string {
	for _, d := range ds {
		key := parent + "." + d.Key
		if d.Value != "" {
			key += "_" + d.Value
		}
		for _, r := range d.Rules {
			cal := r.Limit.Calendar
			if r.Unlimited || !cal.On() {
				continue
			}
			f := limits.WindowFrame(r.Limit, now.UnixMicro())
			at := func(us int64) string { return time.UnixMicro(us).In(cal.Zone).Format(time.RFC3339) }
			lines = append(lines, fmt.Sprintf("  calendar: %s: %s in %s, now %s to %s", key, cal.Unit, cal.Zone, at(f.Start), at(f.End)))
		}
		lines = calendarLines(lines, key, d.Descriptors, now)
	}
	return lines
}
