package metrics_test

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
)

// A store call's finding sets rls_store_up at once; a health check sets it
// too, unless a call has set it since the check started.
func TestStoreUp(t *testing.T) {
	m := metrics.New()
	steps := []struct {
		what string
		do   func()
		want string
	}{
		{"a failed check", func() { m.StoreChecked(time.Now(), false) }, "rls_store_up 0"},
		{"a call finds the store", func() { m.StoreUp(true) }, "rls_store_up 1"},
		{"a call finds it down", func() { m.StoreUp(false) }, "rls_store_up 0"},
		{"a check that started after the call", func() { m.StoreChecked(time.Now(), true) }, "rls_store_up 1"},
	}
	for _, s := range steps {
		s.do()
		wantLines(t, scrape(t, m), s.want)
		if t.Failed() {
			t.Fatalf("after %s", s.what)
		}
	}

	// A check under way while a call finds the store down answers late:
	// older news than the call's, it is dropped.
	start := time.Now()
	m.StoreUp(false)
	m.StoreChecked(start, true)
	wantLines(t, scrape(t, m), "rls_store_up 0")

	// A nil *Metrics records nothing.
	var none *metrics.Metrics
	none.StoreUp(true)
	none.StoreChecked(time.Now(), true)
}
