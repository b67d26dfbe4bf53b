package rls

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// TestExplainCalendar: explain shows a calendar limit's window now, its
// start and end in the limit's zone, in JSON and in text.
func TestExplainCalendar(t *testing.T) {
	d, err := config.Parse("limits.yaml", []byte(`domain: billing
descriptors:
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 10000, calendar: true, time_zone: Europe/Berlin}
`))
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(memory.Options{SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	l := d.Descriptors[0].Rules[0].Limit
	before := limits.WindowFrame(l, time.Now().UnixMicro())
	ex := explain(t, svc, "billing", "plan", "pro")
	after := limits.WindowFrame(l, time.Now().UnixMicro())
	c := ex.Limits[0].Calendar
	if c == nil {
		t.Fatal("no calendar window in the explanation")
	}
	zone := l.Calendar.Zone
	var found bool
	for _, f := range []limits.Frame{before, after} {
		start := time.UnixMicro(f.Start).In(zone)
		if c.Start == start.Format(time.RFC3339) && c.End == time.UnixMicro(f.End).In(zone).Format(time.RFC3339) {
			found = true
			if start.Day() != 1 || start.Hour() != 0 || start.Minute() != 0 {
				t.Errorf("the month starts at %s, want the 1st at midnight in Berlin", start)
			}
		}
	}
	if !found || c.Unit != "month" || c.TimeZone != "Europe/Berlin" {
		t.Errorf("calendar %+v, want the month now in Europe/Berlin (%+v)", c, before)
	}
	var b strings.Builder
	if err := ex.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "      window: calendar month in Europe/Berlin, " + c.Start + " to " + c.End + " (" + c.Length + ")\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, b.String())
	}
	// A plain limit has none.
	f := newFixture(t, nil, Options{})
	if ex := explain(t, f.svc, "edge", "path", "/login", "user", "alice"); ex.Limits[0].Calendar != nil {
		t.Errorf("a plain limit explained with a calendar: %+v", ex.Limits[0].Calendar)
	}
}
