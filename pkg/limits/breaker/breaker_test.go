package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// switchStore fails every hit with err while down, counts the calls that
// reach it, and otherwise allows.
type switchStore struct {
	down  atomic.Bool
	calls atomic.Int64
	err   error
}

func (s *switchStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	s.calls.Add(1)
	for i := range hits {
		if s.down.Load() {
			results[i] = limits.Result{Err: s.err}
		} else {
			results[i] = limits.Result{Allowed: true}
		}
	}
}

var errDown = fmt.Errorf("i/o timeout: %w", limits.ErrUnavailable)

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func decide(b *Breaker) limits.Result {
	res := make([]limits.Result, 1)
	b.Decide(context.Background(), []limits.Hit{{Key: "k"}}, res)
	return res[0]
}

const timeout = 50 * time.Millisecond

// events records the callbacks' calls in order.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, s)
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprint(e.got)
}

func newBreaker(s limits.Store, c *clock, ev *events, cooldown time.Duration) *Breaker {
	o := Options{Failures: 3, Timeout: timeout, Cooldown: cooldown, Now: c.now}
	if ev != nil {
		o.OnChange = func(open bool) { ev.add(map[bool]string{true: "open", false: "closed"}[open]) }
		o.OnStoreUp = func(up bool) { ev.add(map[bool]string{true: "up", false: "down"}[up]) }
	}
	return New(s, o)
}

// Calls in flight together when the store stalls all time out within
// moments of each other: however many, they are one piece of evidence.
func TestBurstDoesNotOpen(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	b := newBreaker(s, c, nil, 0)
	s.down.Store(true)
	for i := range 1000 {
		if r := decide(b); !errors.Is(r.Err, limits.ErrUnavailable) || errors.Is(r.Err, ErrOpen) {
			t.Fatalf("call %d: err = %v, want the store's own error", i, r.Err)
		}
		if i%100 == 99 {
			c.advance(timeout / 20) // 1000 failures over 45 ms: less than a timeout
		}
	}
	if b.Open() {
		t.Fatal("a burst of failures shorter than a store timeout opened the breaker")
	}
	if n := s.calls.Load(); n != 1000 {
		t.Errorf("%d calls reached the store, want all 1000", n)
	}
	// The store answers again: the run of failures is forgotten, and the
	// next failures start a new one.
	s.down.Store(false)
	decide(b)
	s.down.Store(true)
	c.advance(timeout)
	for range 3 {
		decide(b)
	}
	if b.Open() {
		t.Error("a success did not end the run of failures")
	}
}

// Failures that go on for a store timeout open it, once there are enough.
func TestSustainedFailuresOpen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []time.Duration // clock advance before each failed call
		open  []bool          // the breaker after each call
	}{
		{"three over a timeout", []time.Duration{0, timeout / 2, timeout / 2}, []bool{false, false, true}},
		{"two over a timeout, then a third", []time.Duration{0, timeout, 0}, []bool{false, false, true}},
		{"a timeout less a millisecond", []time.Duration{0, timeout / 2, timeout/2 - time.Millisecond, time.Millisecond}, []bool{false, false, false, true}},
		{"refused connections, slowly", []time.Duration{0, time.Second, time.Second}, []bool{false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &switchStore{err: errDown}
			c := newClock()
			b := newBreaker(s, c, nil, 0)
			s.down.Store(true)
			for i, d := range tc.steps {
				c.advance(d)
				r := decide(b)
				if errors.Is(r.Err, ErrOpen) {
					t.Fatalf("call %d was answered by the breaker: only calls after it opened may be", i)
				}
				if got := b.Open(); got != tc.open[i] {
					t.Fatalf("after call %d: open = %v, want %v", i, got, tc.open[i])
				}
			}
			before := s.calls.Load()
			for range 10 {
				if r := decide(b); !errors.Is(r.Err, ErrOpen) {
					t.Fatalf("open breaker: err = %v, want ErrOpen", r.Err)
				}
			}
			if n := s.calls.Load() - before; n != 0 {
				t.Errorf("an open breaker let %d calls through", n)
			}
		})
	}
}

// openBreaker opens b on s by failures spanning a timeout, and returns
// when it opened.
func openBreaker(t *testing.T, b *Breaker, s *switchStore, c *clock) time.Time {
	t.Helper()
	s.down.Store(true)
	for range 2 {
		decide(b)
		c.advance(timeout / 2)
	}
	decide(b)
	if !b.Open() {
		t.Fatal("failures over a store timeout did not open the breaker")
	}
	return c.now()
}

// probeTimes steps the clock by a millisecond for span, calling once per
// step, and returns when calls reached the store, as offsets from start.
func probeTimes(b *Breaker, s *switchStore, c *clock, start time.Time, span time.Duration) []time.Duration {
	var got []time.Duration
	for c.now().Sub(start) < span {
		c.advance(time.Millisecond)
		n := s.calls.Load()
		decide(b)
		if s.calls.Load() != n {
			got = append(got, c.now().Sub(start))
		}
	}
	return got
}

// The first probe goes one store timeout after the opening, then the waits
// double up to the cooldown; the success of a probe closes the breaker, and
// the next opening starts from one timeout again.
func TestProbeSchedule(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	ev := &events{}
	b := newBreaker(s, c, ev, 300*time.Millisecond)
	opened := openBreaker(t, b, s, c)

	ms := time.Millisecond
	want := []time.Duration{50 * ms, 150 * ms, 350 * ms, 650 * ms, 950 * ms, 1250 * ms}
	got := probeTimes(b, s, c, opened, 1300*ms)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("probes at %v after the opening, want %v", got, want)
	}
	if !b.Open() {
		t.Fatal("failed probes closed the breaker")
	}

	// Back: the next probe, 300 ms after the last, closes it.
	s.down.Store(false)
	c.advance(300 * time.Millisecond)
	if r := decide(b); r.Err != nil || !r.Allowed {
		t.Fatalf("probe against a store that is back: %+v", r)
	}
	if b.Open() {
		t.Fatal("breaker still open after a successful probe")
	}
	if r := decide(b); r.Err != nil {
		t.Errorf("closed breaker: %v", r.Err)
	}

	// Down again: the backoff starts over.
	c.advance(time.Second)
	opened = openBreaker(t, b, s, c)
	if got := probeTimes(b, s, c, opened, 200*ms); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Errorf("after closing and opening again, probes at %v, want %v", got, want[:2])
	}
	if got, want := ev.String(), "[down open up closed down open]"; got != want {
		t.Errorf("callbacks saw %s, want %s", got, want)
	}
}

// While a probe is in flight every other call fails fast.
func TestOneProbeAtATime(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	g := &gate{rest: s, entered: make(chan struct{}), release: make(chan struct{})}
	b := newBreaker(g, c, nil, 0)
	openBreaker(t, b, s, c)
	c.advance(timeout)

	s.down.Store(false)
	g.hold.Store(true)
	done := make(chan limits.Result)
	go func() { done <- decide(b) }()
	<-g.entered // the probe is in flight
	n := s.calls.Load()
	for range 5 {
		if r := decide(b); !errors.Is(r.Err, ErrOpen) {
			t.Fatalf("beside a probe in flight: err = %v, want ErrOpen", r.Err)
		}
	}
	if s.calls.Load() != n {
		t.Error("calls beside a probe in flight reached the store")
	}
	close(g.release)
	if r := <-done; r.Err != nil {
		t.Fatalf("probe: %v", r.Err)
	}
	if b.Open() {
		t.Error("a successful probe left the breaker open")
	}
}

// A call let through before the breaker opened that fails after does not
// put the probe off.
func TestLateFailureDoesNotDelayProbe(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	g := &gate{rest: s, entered: make(chan struct{}), release: make(chan struct{})}
	b := newBreaker(g, c, nil, 0)
	s.down.Store(true)
	g.hold.Store(true)
	done := make(chan struct{})
	go func() { decide(b); close(done) }()
	<-g.entered // a call in flight while the breaker opens
	opened := openBreaker(t, b, s, c)
	c.advance(timeout - time.Millisecond)
	close(g.release) // it fails now, a millisecond before the probe is due
	<-done
	c.advance(time.Millisecond)
	if got := c.now().Sub(opened); got != timeout {
		t.Fatalf("clock at %v after the opening, want %v", got, timeout)
	}
	n := s.calls.Load()
	decide(b)
	if s.calls.Load() != n+1 {
		t.Error("the failure of a call made before the opening delayed the probe")
	}
}

// gate passes calls to rest; while hold is set, the next call signals
// entered and waits for release first (hold is then cleared).
type gate struct {
	rest             limits.Store
	hold             atomic.Bool
	entered, release chan struct{}
}

func (g *gate) Decide(ctx context.Context, hits []limits.Hit, results []limits.Result) {
	if g.hold.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	g.rest.Decide(ctx, hits, results)
}

// A call whose caller gave up proves nothing: it neither counts as a
// failure, nor closes the breaker as a probe, nor delays the next probe.
func TestCancelledProvesNothing(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	ev := &events{}
	b := newBreaker(s, c, ev, 0)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	res := make([]limits.Result, 1)
	s.down.Store(true)
	for range 5 {
		b.Decide(cancelled, []limits.Hit{{Key: "k"}}, res)
		c.advance(timeout)
	}
	if b.Open() {
		t.Fatal("cancelled calls opened the breaker")
	}
	if got := ev.String(); got != "[]" {
		t.Errorf("cancelled calls told the callbacks %s", got)
	}
	openBreaker(t, b, s, c)
	c.advance(timeout)
	b.Decide(cancelled, []limits.Hit{{Key: "k"}}, res) // the probe
	if !b.Open() {
		t.Fatal("a cancelled probe closed the breaker")
	}
	n := s.calls.Load()
	decide(b)
	if s.calls.Load() != n+1 {
		t.Error("after a cancelled probe, the next call did not probe")
	}
}

// OnStoreUp follows each call, and only on a change.
func TestOnStoreUp(t *testing.T) {
	s := &switchStore{err: errDown}
	c := newClock()
	ev := &events{}
	b := newBreaker(s, c, ev, 0)
	decide(b)
	if got := ev.String(); got != "[]" {
		t.Fatalf("a store that answers: callbacks saw %s, want nothing", got)
	}
	s.down.Store(true)
	decide(b)
	if got := ev.String(); got != "[down]" {
		t.Fatalf("the first failed call: callbacks saw %s, want [down] at once", got)
	}
	for range 5 {
		decide(b)
	}
	s.down.Store(false)
	for range 5 {
		decide(b)
	}
	if got := ev.String(); got != "[down up]" {
		t.Errorf("callbacks saw %s, want [down up]", got)
	}
}

func TestReplyErrorsDoNotOpen(t *testing.T) {
	s := &switchStore{err: errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")}
	c := newClock()
	b := New(s, Options{Failures: 1, Now: c.now})
	s.down.Store(true)
	for range 5 {
		decide(b)
		c.advance(time.Second)
	}
	if b.Open() {
		t.Error("a store that answers with reply errors opened the breaker")
	}
}

func TestPartialFailureDoesNotOpen(t *testing.T) {
	c := newClock()
	b := New(partialStore{}, Options{Failures: 1, Now: c.now})
	res := make([]limits.Result, 2)
	for range 5 {
		b.Decide(context.Background(), []limits.Hit{{Key: "a"}, {Key: "b"}}, res)
		c.advance(time.Second)
	}
	if b.Open() {
		t.Error("one failed node of two opened the breaker for all")
	}
}

// partialStore fails the first hit only, as a cluster with one node down.
type partialStore struct{}

func (partialStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	results[0] = limits.Result{Err: limits.ErrUnavailable}
	for i := 1; i < len(hits); i++ {
		results[i] = limits.Result{Allowed: true}
	}
}

// okStore allows every hit and does nothing else.
type okStore struct{}

func (okStore) Decide(_ context.Context, hits []limits.Hit, results []limits.Result) {
	for i := range hits {
		results[i] = limits.Result{Allowed: true}
	}
}

// The closed breaker's path, which every call takes while the store
// answers: compare with BenchmarkBare for the breaker's own cost.
func BenchmarkClosed(b *testing.B) {
	br := New(okStore{}, Options{OnChange: func(bool) {}, OnStoreUp: func(bool) {}})
	benchStore(b, br)
}

func BenchmarkBare(b *testing.B) { benchStore(b, okStore{}) }

func benchStore(b *testing.B, s limits.Store) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		hits := []limits.Hit{{Key: "k", Cost: 1}}
		res := make([]limits.Result, 1)
		for pb.Next() {
			s.Decide(ctx, hits, res)
		}
	})
}

// The open breaker's path, which every call takes during an outage.
func BenchmarkOpen(b *testing.B) {
	br := New(okStore{}, Options{})
	br.circuit.down.Store(true)
	br.circuit.probeAt.Store(time.Now().Add(time.Hour).UnixNano())
	br.circuit.open.Store(true)
	benchStore(b, br)
}

// slowStore fails as a switchStore does, and tells whether its backend
// has answered lately (Answering).
type slowStore struct {
	switchStore
	answering atomic.Bool
}

func (s *slowStore) AnsweredWithin(time.Duration) bool { return s.answering.Load() }

// A store that answers late (its calls time out, its backend's replies
// still come back) is slow, not down: its timeouts, however long they go
// on, do not open the breaker; once it answers nothing, they do, and
// failures other than timeouts open it whatever it answers.
func TestSlowDoesNotOpen(t *testing.T) {
	s := &slowStore{switchStore: switchStore{err: fmt.Errorf("%w: %w", limits.ErrUnavailable, context.DeadlineExceeded)}}
	s.answering.Store(true)
	c := newClock()
	b := newBreaker(s, c, nil, 0)
	s.down.Store(true)
	for i := range 20 {
		if r := decide(b); errors.Is(r.Err, ErrOpen) {
			t.Fatalf("call %d answered by the breaker on a slow store", i)
		}
		c.advance(timeout / 2)
	}
	if b.Open() {
		t.Fatal("failures of a store that still answers opened the breaker")
	}
	s.answering.Store(false)
	if !failThrice(b, c) {
		t.Error("three failures over a timeout of a store that answers nothing left the breaker closed")
	}
	// Refused connections are not slow: they open it, answering or not.
	r := &slowStore{switchStore: switchStore{err: errDown}}
	r.answering.Store(true)
	r.down.Store(true)
	if !failThrice(newBreaker(r, c, nil, 0), c) {
		t.Error("three failures over a timeout, not timeouts, left the breaker closed")
	}
}

// failThrice makes three calls over a timeout on b, and reports whether
// b is open after them.
func failThrice(b *Breaker, c *clock) bool {
	for _, d := range []time.Duration{0, timeout / 2, timeout / 2} {
		c.advance(d)
		decide(b)
	}
	return b.Open()
}
