package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Hold counts by domain and outcome; a nil *Metrics records nothing.
func TestHold(t *testing.T) {
	var none *Metrics
	none.Hold("llm", HoldInvalid)
	m := New()
	m.Hold("llm", "reserved")
	m.Hold("llm", "reserved")
	m.Hold("llm", HoldSettleWithoutID)
	for outcome, want := range map[string]float64{"reserved": 2, HoldSettleWithoutID: 1, HoldInvalid: 0} {
		if got := testutil.ToFloat64(m.holds.WithLabelValues("llm", outcome)); got != want {
			t.Errorf("rls_holds_total{outcome=%q}: got %v, want %v", outcome, got, want)
		}
	}
}
