package descriptors

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestCalendarKey: a calendar limit's key names its unit and zone, so that
// it never shares counters with a plain window of the same period, nor with
// the same calendar in another zone, whose windows are numbered alike.
func TestCalendarKey(t *testing.T) {
	zone := func(name string) *time.Location {
		z, err := limits.LoadZone(name)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	month := limits.Limit{Algorithm: limits.FixedWindow, Requests: 10, Period: 30 * 24 * time.Hour}
	berlin, newYork := month, month
	berlin.Calendar = limits.Calendar{Unit: limits.CalendarMonth, Zone: zone("Europe/Berlin")}
	newYork.Calendar = limits.Calendar{Unit: limits.CalendarMonth, Zone: zone("America/New_York")}
	in := KeyInput{Domain: "edge", Entries: []Entry{{"plan", "pro"}}}
	keys := map[string]bool{}
	for _, l := range []limits.Limit{month, berlin, newYork} {
		in.Limit = l
		keys[Key(in)] = true
	}
	if len(keys) != 3 {
		t.Fatalf("keys collide: %v", keys)
	}
	in.Limit = berlin
	if got, want := Key(in), ":fw:2592000000000@month@Europe/Berlin:0:4:edge4:plan3:pro"; !strings.HasSuffix(got, want) {
		t.Errorf("key = %q, want suffix %q", got, want)
	}
}
