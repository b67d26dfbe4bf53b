package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// harness runs one case against one new store, with a reference model of
// the store contract built on limits.DecideWithin.
type harness struct {
	t      *testing.T
	store  limits.Store
	clock  atomic.Int64
	prefix string
	ref    map[string]refState
}

// refState is the reference model's entry: State is absent from ExpireAt on.
type refState struct {
	state    limits.State
	expireAt int64
}

// run is a counter so that every case's keys are new even when one backend
// serves several runs of the suite.
var runs atomic.Int64

func newHarness(t *testing.T, newStore Factory) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		prefix: fmt.Sprintf("storetest:%d:%d:%s:", time.Now().UnixNano(), runs.Add(1), t.Name()),
		ref:    map[string]refState{},
	}
	h.clock.Store(Start)
	h.store = newStore(t, h.clock.Load)
	return h
}

func (h *harness) run(a limits.Algorithm, c testCase) {
	h.t.Helper()
	var last limits.Result
	for i := 0; i < len(c.steps); {
		j := i + 1
		for j < len(c.steps) && c.steps[j].same {
			j++
		}
		switch w := c.steps[i].wait; w {
		case untilRetry, beforeRetry:
			if last.Allowed || last.RetryAfter <= 0 {
				h.t.Fatalf("step %d waits for the previous result's RetryAfter, but it has none: %s", i, format(last))
			}
			h.clock.Add(last.RetryAfter.Microseconds())
			if w == beforeRetry {
				h.clock.Add(-1)
			}
		default:
			h.clock.Add(w.Microseconds())
		}
		call := c.steps[i:j]
		if call[0].reset {
			h.reset(i, h.hits(a, c, call))
			i = j
			continue
		}
		hits := h.hits(a, c, call)
		results := h.decide(hits)
		for k, st := range call {
			if st.err != nil {
				if !errors.Is(results[k].Err, st.err) {
					h.t.Errorf("step %d (%s, key %s, cost %d): got %s, want the error %v",
						i+k, hits[k].Limit, h.name(hits[k].Key), st.cost, format(results[k]), st.err)
				}
				continue
			}
			if want := st.want.of(a); results[k] != want {
				h.t.Errorf("step %d (%s, key %s, cost %d) at start+%s:\n got  %s\n want %s",
					i+k, hits[k].Limit, h.name(hits[k].Key), st.cost,
					time.Duration(h.clock.Load()-Start)*time.Microsecond, format(results[k]), format(want))
			}
		}
		if h.t.Failed() {
			return // the later steps would only repeat the difference
		}
		if call[len(call)-1].err == nil {
			last = results[len(results)-1]
		}
		i = j
	}
}

// hits are the hits of one call's steps, of algorithm a in case c.
func (h *harness) hits(a limits.Algorithm, c testCase, call []step) []limits.Hit {
	h.t.Helper()
	hits := make([]limits.Hit, len(call))
	for k, st := range call {
		l := limits.Limit{Algorithm: a, Requests: c.n, Period: c.period, Burst: c.burst, CountRefused: c.countRefused}
		if st.n != 0 {
			l.Requests = st.n
		}
		if st.with != nil {
			st.with(&l)
		}
		key := st.key
		if key == "" {
			key = "a"
		}
		if st.joint && (k+1 == len(call)) {
			h.t.Fatalf("step %d of a call: joint with no step after it in the same call", k)
		}
		// A case's keys share a hash tag, as one descriptor's keys do, so
		// that any of them may form a joint run.
		hits[k] = limits.Hit{Key: h.prefix + "{case}:" + key, Limit: l, Cost: st.cost, MaxDelay: st.maxDelay, Joint: st.joint}
	}
	return hits
}

// reset resets the keys of hits (step i) on the store, and in the
// reference model.
func (h *harness) reset(i int, hits []limits.Hit) {
	h.t.Helper()
	if len(hits) != 1 {
		h.t.Fatalf("step %d: a reset step must be alone in its call", i)
	}
	if err := limits.Reset(h.t.Context(), h.store, hits); err != nil {
		h.t.Fatalf("step %d: reset %s: %v", i, h.name(hits[0].Key), err)
	}
	delete(h.ref, hits[0].Key)
}

// name is a key as the case names it.
func (h *harness) name(key string) string {
	return strings.TrimPrefix(key, h.prefix+"{case}:")
}

// decide sends hits in one Decide call and checks every result against the
// reference model: the store must answer exactly as limits.DecideWithin
// does, run by run.
func (h *harness) decide(hits []limits.Hit) []limits.Result {
	h.t.Helper()
	results := make([]limits.Result, len(hits))
	for i := range results {
		// Garbage, to check that the store writes every field.
		results[i] = limits.Result{Allowed: true, Remaining: -7, RetryAfter: -time.Hour, ResetAfter: -time.Hour, Delay: -time.Hour, Err: errGarbage}
	}
	h.store.Decide(h.t.Context(), hits, results)
	now := h.clock.Load()
	want := h.reference(hits, now)
	for i, hit := range hits {
		if want[i].Err != nil {
			if !errors.Is(results[i].Err, want[i].Err) {
				h.t.Errorf("hit %d (%s, key %s, cost %d): got %s, want the error %v",
					i, hit.Limit, h.name(hit.Key), hit.Cost, format(results[i]), want[i].Err)
			}
			continue
		}
		if results[i].Err != nil {
			h.t.Fatalf("hit %d (%s, cost %d): store error: %v", i, hit.Limit, hit.Cost, results[i].Err)
		}
		if results[i] != want[i] {
			h.t.Errorf("hit %d (%s, key %s, cost %d) at start+%s differs from limits.DecideWithin:\n got  %s\n want %s",
				i, hit.Limit, h.name(hit.Key), hit.Cost,
				time.Duration(now-Start)*time.Microsecond, format(results[i]), format(want[i]))
		}
	}
	return results
}

var errGarbage = fmt.Errorf("storetest: result not written by the store")

// reference decides hits as the store contract says: each run of joint hits
// is decided whole, its new states kept only if every hit is allowed, else
// only those of its count_refused limits; a run that repeats a key is not
// decided, every hit of it failing with limits.ErrRepeatedKey.
func (h *harness) reference(hits []limits.Hit, now int64) []limits.Result {
	results := make([]limits.Result, len(hits))
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && hits[j-1].Joint {
			j++
		}
		if limits.RepeatedKey(hits[i:j]) >= 0 {
			for k := i; k < j; k++ {
				results[k] = limits.Result{Err: limits.ErrRepeatedKey}
			}
			i = j
			continue
		}
		view := func(key string) limits.State {
			r := h.ref[key]
			if r.state.Live && now < r.expireAt {
				return r.state
			}
			return limits.State{}
		}
		decisions := make([]limits.Decision, j-i)
		allowed := true
		for k, hit := range hits[i:j] {
			d := limits.DecideWithin(hit.Limit, view(hit.Key), hit.Cost, now, hit.MaxDelayMicros())
			decisions[k], results[i+k] = d, d.Result
			allowed = allowed && d.Result.Allowed
		}
		for k, hit := range hits[i:j] {
			d := decisions[k]
			if !d.Changed || !(allowed || hit.Limit.CountRefused || d.Locks) {
				continue
			}
			if d.State.Live && d.ExpireAt > now {
				h.ref[hit.Key] = refState{d.State, d.ExpireAt}
			} else {
				delete(h.ref, hit.Key)
			}
		}
		i = j
	}
	return results
}

func format(r limits.Result) string {
	verdict := "refused"
	if r.Allowed {
		verdict = "allowed"
	}
	s := fmt.Sprintf("%s remaining=%d retry=%s reset=%s", verdict, r.Remaining, r.RetryAfter, r.ResetAfter)
	if r.Delay != 0 {
		s += fmt.Sprintf(" delay=%s", r.Delay)
	}
	if r.Err != nil {
		s += fmt.Sprintf(" err=%v", r.Err)
	}
	return s
}
