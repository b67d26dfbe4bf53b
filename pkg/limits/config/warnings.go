package config

import (
	"fmt"
	"slices"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Warnings lists what c holds that loads and is served but is most likely
// not what its author meant, one line each naming the file, line and
// limit, with the reason: check-config and lint print them, the server
// logs them at every load. Today that is a sliding_window with calendar:
// true (slidingCalendar). A warning, not an error: such a file loaded
// before the default of a calendar limit became fixed_window, and a
// refusal would stop a server that served it at its next start.
func (c *Config) Warnings() []string {
	var ws []string
	for _, d := range c.Domains {
		ws = appendWarnings(ws, d.File, d.Name, d.Descriptors)
	}
	slices.Sort(ws)
	return ws
}

func appendWarnings(ws []string, file, parent string, ds []*Descriptor) []string {
	for _, d := range ds {
		key := compositeKey(parent, d.Key, d.Value)
		for _, r := range d.Rules {
			if !r.Unlimited && r.Limit.Calendar.On() && r.Limit.Algorithm == limits.SlidingWindow {
				ws = append(ws, fmt.Sprintf("%s: %s: %s", place(file, r.Line), key, slidingCalendar))
			}
		}
		ws = appendWarnings(ws, file, key, d.Descriptors)
	}
	return ws
}

// slidingCalendar is why a sliding window on a calendar is warned of.
const slidingCalendar = "algorithm: sliding_window with calendar: true weighs the last calendar window's count into this one, " +
	"so a key that used its quota is refused past the zone's boundary, up to a whole window more " +
	"(a daily quota used up in the morning is refused until the next day's afternoon); " +
	"for a quota that starts over at the boundary, leave algorithm out (a calendar limit's default is fixed_window) or set fixed_window"
