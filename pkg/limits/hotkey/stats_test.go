package hotkey

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestStats: the figures the metrics export account for the store's work.
// On a window (no refunds), every hit the store saw was a share's charge
// (Syncs) or a hit sent plainly (Direct), and the hits admitted locally
// were paid for by the shares charged.
func TestStats(t *testing.T) {
	f := newFleet(t, 1)
	l := limits.Limit{Algorithm: limits.FixedWindow, Requests: 1000, Period: time.Second, SyncInterval: 10 * time.Millisecond}
	admitted := 0
	for _, n := range f.run(t, l, 3, 2000) {
		admitted += n
	}
	st := f.stores[0].Stats()
	if st.Keys != 1 || st.Local == 0 || st.Syncs == 0 || st.Direct == 0 {
		t.Fatalf("after three seconds at twice the limit: %+v, want one key, local answers, syncs and plain hits", st)
	}
	if sent := f.shared.hits.Load(); uint64(sent) != st.Syncs+st.Direct {
		t.Errorf("the store saw %d hits, the figures say %d syncs and %d plain hits", sent, st.Syncs, st.Direct)
	}
	if st.Local > st.Charged || st.Charged > 3*1000 {
		t.Errorf("%d local answers from %d charged, want no more than charged, and charged within the limit's 3,000", st.Local, st.Charged)
	}
	if int(st.Local) > admitted {
		t.Errorf("%d local answers, more than the %d admitted", st.Local, admitted)
	}
}
