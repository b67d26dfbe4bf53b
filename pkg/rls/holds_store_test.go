package rls

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// answer calls f with d alone and returns its status.
func (f *holdsFixture) answer(t *testing.T, d *ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	resp, err := f.call(d)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Statuses[0]
}

// A request's life on a budget, on the embedded store: the reserve takes
// the estimate, a second request that does not fit is refused, Envoy's
// retry of the reserve charges nothing, the settle puts the actual cost
// in the estimate's place, a settle with no hold is a plain charge; each
// counted by its outcome.
func TestHoldsBudget(t *testing.T) {
	f := newHoldsFixture(t, nil)
	steps := []struct {
		name      string
		d         *ratelimitv3.RateLimitDescriptor
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{"reserve r7", costly(60, "api_key", "t1", "request_id", "r7"), ok, 40},
		{"reserve r8, too much", costly(50, "api_key", "t1", "request_id", "r8"), over, 40},
		{"retry r7", costly(60, "api_key", "t1", "request_id", "r7"), ok, 40},
		{"peek", costly(0, "api_key", "t1"), ok, 40},
		{"settle r7 at 30", costly(30, "api_key", "t1", "request_id", "r7", "settle", "1"), ok, 70},
		{"settle r7 again: no hold", costly(5, "api_key", "t1", "request_id", "r7", "settle", "1"), ok, 65},
		{"settle r8: refused, no hold", costly(5, "api_key", "t1", "request_id", "r8", "settle", "1"), ok, 60},
	}
	for _, s := range steps {
		st := f.answer(t, s.d)
		if st.Code != s.code || st.LimitRemaining != s.remaining {
			t.Errorf("%s: %v remaining %d, want %v %d", s.name, st.Code, st.LimitRemaining, s.code, s.remaining)
		}
	}
	for outcome, want := range map[string]float64{
		limits.HoldReserved.String(): 1, limits.HoldRefused.String(): 1, limits.HoldRepeated.String(): 1,
		limits.HoldSettled.String(): 1, limits.HoldUnheld.String(): 2,
	} {
		if got := holdsCount(t, f.metrics, "llm", outcome); got != want {
			t.Errorf("rls_holds_total{outcome=%q}: got %v, want %v", outcome, got, want)
		}
	}
}

// The concurrency release defect, through the service: the settles Envoy
// sends for refused requests name ids that hold no slots, and free none.
func TestHoldsConcurrencySettles(t *testing.T) {
	f := newHoldsFixture(t, nil)
	for _, id := range []string{"a", "b"} {
		if st := f.answer(t, costly(1, "slots", "s", "request_id", id)); st.Code != ok {
			t.Fatalf("reserve %s: %v, want OK", id, st.Code)
		}
	}
	for _, id := range []string{"c", "d"} {
		if st := f.answer(t, costly(1, "slots", "s", "request_id", id)); st.Code != over {
			t.Fatalf("reserve %s: %v, want OVER_LIMIT", id, st.Code)
		}
		f.answer(t, costly(1, "slots", "s", "request_id", id, "settle", "1"))
	}
	if st := f.answer(t, costly(1, "slots", "s", "request_id", "e")); st.Code != over {
		t.Errorf("reserve e after the refused ones' settles: %v, want OVER_LIMIT (a and b still hold both slots)", st.Code)
	}
	f.answer(t, costly(1, "slots", "s", "request_id", "a", "settle", "1"))
	if st := f.answer(t, costly(1, "slots", "s", "request_id", "e")); st.Code != ok {
		t.Errorf("reserve e after a's settle: %v, want OK", st.Code)
	}
}

// A descriptor's limits are one joint run: a reserve one of them refuses
// holds nothing on the others. A peek, and explain's, counts what is held.
func TestHoldsJointAndPeek(t *testing.T) {
	f := newHoldsFixture(t, nil)
	if st := f.answer(t, costly(8, "model", "m", "request_id", "a")); st.Code != ok {
		t.Fatalf("reserve a: %v", st.Code)
	}
	if st := f.answer(t, costly(5, "model", "m", "request_id", "b")); st.Code != over {
		t.Fatalf("reserve b: %v, want OVER_LIMIT from per-minute", st.Code)
	}
	ex := explain(t, f.svc, "llm", "model", "m")
	for _, l := range ex.Limits {
		if want := l.RequestsPerUnit - 8; l.State.Remaining != want {
			t.Errorf("%s: remaining %d, want %d (a's 8 held, nothing of b's)", l.Name, l.State.Remaining, want)
		}
	}
	if got := holdsCount(t, f.metrics, "llm", limits.HoldRefused.String()); got != 1 {
		t.Errorf("refused: counted %v, want 1 (once per descriptor)", got)
	}
}

// Through failure mode local, the embedded store keeps the hold and the
// settle finds it.
func TestHoldsFailureLocalSettles(t *testing.T) {
	f := newHoldsFixture(t, failingStore{})
	f.answer(t, costly(4, "fallback", "x", "request_id", "r1"))
	if st := f.answer(t, costly(2, "fallback", "x", "request_id", "r1", "settle", "1")); st.LimitRemaining != 3 {
		t.Errorf("after the settle: remaining %d, want 3 (2 charged in place of 4)", st.LimitRemaining)
	}
	if got := holdsCount(t, f.metrics, "llm", limits.HoldSettled.String()); got != 1 {
		t.Errorf("settled: counted %v, want 1", got)
	}
}
