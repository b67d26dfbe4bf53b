package redisstore

import (
	"reflect"
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// checkSlots compares a concurrency limit's live members, as inspect read
// them (one member per slot, scored by its lease's end), with the model's
// slots, and requires a TTL, where there is one, no shorter than the
// newest slot's life. Expired members may linger until the key is next
// touched. It reports false, having reset the model, when Redis's own
// clock expired the key before the test could read it.
func checkSlots(t *testing.T, where string, in inspection, q *sequence, now, elapsedMs int64) bool {
	t.Helper()
	pttl, flat := inspected(t, in)
	var want []limits.LogEntry
	stateMs := int64(0)
	if q.model.state.Live && now < q.model.expireAt {
		want = mergeLog(q.model.state.Log, now)
		stateMs = max(2, (q.model.expireAt-now+999)/1000)
	}
	got := mergeLog(entries(t, flat), now)
	switch {
	case len(got) == 0 && len(want) > 0 && pttl == -2 && stateMs <= elapsedMs:
		q.model = model{}
		return false
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s: the set holds the slots %v, want the Go slots %v", where, got, want)
	case len(want) > 0 && pttl >= 0 && pttl < stateMs-elapsedMs:
		t.Fatalf("%s: PTTL = %d ms, shorter than the slots' %d ms", where, pttl, stateMs)
	}
	return true
}

// TestConcurrencyHolders: goroutines that take and give back slots on one
// key, through one store on Redis's clock, never hold more than its slots
// at once, and leave none held.
func TestConcurrencyHolders(t *testing.T) {
	s, _, _ := setup(t, Options{})
	t.Cleanup(s.Close)
	storetest.Holders(t, s, "holders")
}
