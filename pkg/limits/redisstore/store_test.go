package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the outage tests make many on purpose.
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// implemented are the algorithms this store has scripts for.
var implemented = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket, limits.SlidingLog, limits.LeakyBucket}

// testTimeout is generous: the race detector slows everything down, and
// these tests are about decisions, not latency (TestOutage is).
const testTimeout = 2 * time.Second

// newClient returns a client of srv, closed when the test ends.
func newClient(t testing.TB, o ClientOptions) redis.UniversalClient {
	t.Helper()
	c, err := NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup starts a Redis and returns a store on it and a client to inspect it.
func setup(t testing.TB, opts Options) (*Store, redis.UniversalClient, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	return New(c, opts), c, srv
}

func fixedClock(now int64) Options {
	return Options{Clock: func() int64 { return now }}
}

func hourly(alg limits.Algorithm, n int64) limits.Limit {
	return limits.Limit{Algorithm: alg, Requests: n, Period: time.Hour}
}

// allowing is n per hour that allows n hits at one instant: for a leaky
// bucket, a queue of n-1 behind the request in service (then waits are up to
// (n-1)/n hour, and Hit.MaxDelay zero does not bound them).
func allowing(alg limits.Algorithm, n int64) limits.Limit {
	l := hourly(alg, n)
	if alg == limits.LeakyBucket {
		l.Burst = n - 1
	}
	return l
}

func decideOne(t testing.TB, s *Store, h limits.Hit) limits.Result {
	t.Helper()
	res := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{h}, res)
	return res[0]
}

func TestDecideBasics(t *testing.T) {
	const now = 1_767_225_600_000_000 + 123_456 // an hour boundary + a bit
	s, _, _ := setup(t, fixedClock(now))
	for _, alg := range implemented {
		t.Run(alg.String(), func(t *testing.T) {
			l := allowing(alg, 3)
			key := "basics:" + alg.String()
			for i := range 3 {
				r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1})
				if r.Err != nil || !r.Allowed || r.Remaining != int64(2-i) {
					t.Fatalf("hit %d: got %+v, want allowed with remaining %d", i, r, 2-i)
				}
			}
			r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1})
			if r.Err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.ResetAfter < r.RetryAfter {
				t.Fatalf("4th hit: got %+v, want refused with a positive retry, and a reset no sooner", r)
			}
		})
	}
}

// TestNativeOnly decides every algorithm alone and in joint runs, with
// charges, refusals, peeks and refunds, and requires that Redis ran no
// script, and that every key left has a TTL.
func TestNativeOnly(t *testing.T) {
	s, c, _ := setup(t, fixedClock(1_767_225_600_000_000))
	ctx := context.Background()
	var calls []limits.Hit
	for i, alg := range implemented {
		l := allowing(alg, 3)
		next := implemented[(i+1)%len(implemented)]
		for _, cost := range []int64{1, 2, 0, 5, -1, 4} {
			calls = append(calls,
				limits.Hit{Key: "native:" + alg.String(), Limit: l, Cost: cost},
				limits.Hit{Key: "{native" + alg.String() + "}:a", Limit: l, Cost: cost, Joint: true},
				limits.Hit{Key: "{native" + alg.String() + "}:b", Limit: allowing(next, 4), Cost: 1})
		}
	}
	scripts := func() int { return cmdCalls(t, c, "eval") + cmdCalls(t, c, "evalsha") }
	before := scripts()
	for k := 0; k < len(calls); k += 3 {
		res := make([]limits.Result, 3)
		s.Decide(ctx, calls[k:k+3], res)
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("hit %d: %v", k+i, r.Err)
			}
		}
	}
	if n := scripts() - before; n != 0 {
		t.Errorf("Redis ran %d scripts, want none", n)
	}
	keys, err := c.Keys(ctx, "*native*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS: %v, %v", keys, err)
	}
	for _, k := range keys {
		if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl < 0 {
			t.Errorf("key %q: PTTL %v, %v; want a TTL", k, ttl, err)
		}
	}
}

func TestPerHitErrors(t *testing.T) {
	const now = 1_767_225_600_000_000
	s, c, _ := setup(t, fixedClock(now))
	ctx := context.Background()
	// The windows' counters of this hour, and the other algorithms' keys.
	hour := windowKey("", floorDiv(now, time.Hour.Microseconds()))
	for _, k := range []string{"list", "list" + hour} {
		if err := c.RPush(ctx, k, "x").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"garbage", "garbage" + hour, "garbage-lb"} {
		if err := c.Set(ctx, k, "not a state", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ZAdd(ctx, "badlog", redis.Z{Score: 1_767_225_600_000_000, Member: "not an entry"}).Err(); err != nil {
		t.Fatal(err)
	}
	good := hourly(limits.SlidingWindow, 5)
	fw := hourly(limits.FixedWindow, 5)
	sl := hourly(limits.SlidingLog, 5)
	lb := allowing(limits.LeakyBucket, 5)
	invalid := limits.Limit{Algorithm: limits.FixedWindow, Requests: -1, Period: time.Hour}
	hits := []limits.Hit{
		{Key: "a", Limit: good, Cost: 1},
		{Key: "list", Limit: good, Cost: 1},
		{Key: "b", Limit: hourly(limits.TokenBucket, 5), Cost: 2},
		{Key: "garbage", Limit: fw, Cost: 1},
		{Key: "c", Limit: invalid, Cost: 1},
		{Key: "d", Limit: sl, Cost: 1},
		{Key: "e", Limit: fw, Cost: 1},
		{Key: "garbage", Limit: sl, Cost: 1},
		{Key: "f", Limit: lb, Cost: 1},
		// BITFIELD reads (and writes) any string: the value is checked
		// after.
		{Key: "garbage-lb", Limit: lb, Cost: 1},
		// A sliding log counts any member as a unit.
		{Key: "badlog", Limit: sl, Cost: 1},
		// A joint run fails as a whole, and charges nothing, when one of
		// its scripts' keys is of the wrong type...
		{Key: "{j}:1", Limit: fw, Cost: 1, Joint: true},
		{Key: "list", Limit: fw, Cost: 1},
		// ... or one of its limits is invalid.
		{Key: "{j}:2", Limit: fw, Cost: 1, Joint: true},
		{Key: "{j}:3", Limit: invalid, Cost: 1},
		// The hits after them are decided, a joint run among them.
		{Key: "{j}:4", Limit: sl, Cost: 1, Joint: true},
		{Key: "{j}:5", Limit: lb, Cost: 1, Joint: true},
		{Key: "{j}:6", Limit: good, Cost: 1},
		{Key: "g", Limit: fw, Cost: 2},
	}
	res := make([]limits.Result, len(hits))
	s.Decide(ctx, hits, res)
	wantErr := map[int]string{
		1: "WRONGTYPE", 3: "malformed", 4: "requests_per_unit", 7: "WRONGTYPE", 9: "malformed",
		11: "WRONGTYPE", 12: "WRONGTYPE", 13: "requests_per_unit", 14: "requests_per_unit",
	}
	wantRemaining := map[int]int64{0: 4, 2: 3, 5: 4, 6: 4, 8: 4, 10: 3, 15: 4, 16: 4, 17: 4, 18: 3}
	for i, r := range res {
		if want, ok := wantErr[i]; ok {
			if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
				t.Errorf("hit %d (%s): got err %v, want one mentioning %q", i, hits[i].Key, r.Err, want)
			}
			continue
		}
		if r.Err != nil || !r.Allowed || r.Remaining != wantRemaining[i] {
			t.Errorf("hit %d (%s): got %+v, want allowed with remaining %d", i, hits[i].Key, r, wantRemaining[i])
		}
	}
	// The refused keys are untouched (BITFIELD writes any string: a
	// malformed counter is found after), and the keys of failed runs hold
	// nothing.
	for _, k := range []string{"list", "list" + hour} {
		if typ := c.Type(ctx, k).Val(); typ != "list" {
			t.Errorf("type of %s = %q", k, typ)
		}
	}
	if v := c.Get(ctx, "garbage").Val(); v != "not a state" {
		t.Errorf("garbage = %q", v)
	}
	if n := c.ZCard(ctx, "badlog").Val(); n != 2 {
		t.Errorf("badlog has %d entries, want 2", n)
	}
	for _, k := range []string{"{j}:1" + hour, "{j}:2" + hour, "{j}:3" + hour} {
		// The run of {j}:1 was charged, then undone: its counter is at
		// zero, as good as absent.
		if v, err := c.Get(ctx, k).Result(); err != redis.Nil && v != "\x00\x00\x00\x00\x00\x00\x00\x00" {
			t.Errorf("%s of a failed joint run = %q, %v; want none, or zero", k, v, err)
		}
	}
}

// TestJointRepeatedKey: a joint run that names a key twice is not sent:
// every hit of it fails with limits.ErrRepeatedKey and the key is left
// exactly as it was (value and TTL), while the other hits of the call are
// decided.
func TestJointRepeatedKey(t *testing.T) {
	s, c, _ := setup(t, fixedClock(1_767_225_600_000_000))
	ctx := context.Background()
	a := limits.Hit{Key: "{rep}:a", Limit: hourly(limits.SlidingLog, 2), Cost: 1}
	if r := decideOne(t, s, a); r.Err != nil || !r.Allowed {
		t.Fatalf("a: got %+v, want allowed", r)
	}
	before := c.Dump(ctx, a.Key).Val()
	pttl := c.PTTL(ctx, a.Key).Val()

	first, again := a, a
	first.Joint = true
	b := limits.Hit{Key: "{rep}:b", Limit: hourly(limits.FixedWindow, 1), Cost: 1}
	hits := []limits.Hit{first, again, b}
	res := make([]limits.Result, len(hits))
	s.Decide(ctx, hits, res)
	for i, r := range res[:2] {
		if !errors.Is(r.Err, limits.ErrRepeatedKey) {
			t.Errorf("hit %d of the run a, a: got %+v, want limits.ErrRepeatedKey", i, r)
		}
	}
	if r := res[2]; r.Err != nil || !r.Allowed {
		t.Errorf("b after the refused run: got %+v, want allowed", r)
	}
	if got := c.Dump(ctx, a.Key).Val(); got != before {
		t.Errorf("a after the refused run: changed")
	}
	if got := c.PTTL(ctx, a.Key).Val(); got > pttl || got < pttl-time.Second {
		t.Errorf("a after the refused run: PTTL %s, want %s", got, pttl)
	}
}

// TestBeyondPrecision: a token bucket that would take longer than 2^52 µs to
// fill must be refused before it reaches Redis, where its wait loops, in
// doubles, would never end (x-1 == x from 2^53 on) and block Redis for every
// client. limits.Limit.Validate refuses it today; the largest windows pass.
func TestBeyondPrecision(t *testing.T) {
	s, c, _ := setup(t, Options{})
	hits := []limits.Hit{
		{Key: "p1", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: limits.MaxPeriod, Burst: limits.MaxRequests}, Cost: limits.MaxRequests},
		{Key: "p2", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: 365 * 24 * time.Hour, Burst: 1000}, Cost: 1000},
		{Key: "p3", Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: limits.MaxRequests, Period: limits.MaxPeriod}, Cost: 1},
		{Key: "p4", Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: 365 * 24 * time.Hour, Burst: 10}, Cost: 10},
	}
	res := make([]limits.Result, len(hits))
	s.Decide(context.Background(), hits, res)
	for i, r := range res[:2] {
		if r.Err == nil {
			t.Errorf("hit %s: got %+v, want an error", hits[i].Key, r)
		}
		if n := c.Exists(context.Background(), hits[i].Key).Val(); n != 0 {
			t.Errorf("hit %s: key written", hits[i].Key)
		}
	}
	for i, r := range res[2:] {
		if r.Err != nil || !r.Allowed {
			t.Errorf("hit %s: got %+v, want allowed", hits[i+2].Key, r)
		}
	}
}

// TestResultsShorterThanHits checks that a caller's mistake is not a panic.
func TestResultsShorterThanHits(t *testing.T) {
	s, _, _ := setup(t, Options{})
	l := hourly(limits.FixedWindow, 5)
	res := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{{Key: "x", Limit: l, Cost: 1}, {Key: "y", Limit: l, Cost: 1}}, res)
	if res[0].Err != nil || !res[0].Allowed {
		t.Errorf("got %+v, want the first hit decided", res[0])
	}
	s.Decide(context.Background(), nil, nil)
}

// TestRealTime uses the Redis server's TIME, as production does.
func TestRealTime(t *testing.T) {
	s, c, _ := setup(t, Options{})
	ctx := context.Background()
	const n = 5
	for _, alg := range implemented {
		t.Run(alg.String(), func(t *testing.T) {
			if alg == limits.FixedWindow {
				waitPastBoundary(t, c, time.Hour)
			}
			l := allowing(alg, n)
			key := "realtime:" + alg.String()
			for i := range n {
				if r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1}); r.Err != nil || !r.Allowed || r.Remaining != n-1-int64(i) {
					t.Fatalf("hit %d: got %+v, want allowed, remaining %d", i, r, n-1-i)
				}
			}
			r := decideOne(t, s, limits.Hit{Key: key, Limit: l, Cost: 1})
			if r.Err != nil || r.Allowed {
				t.Fatalf("hit %d: got %+v, want refused", n, r)
			}
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			var wantReset time.Duration
			switch alg {
			case limits.FixedWindow:
				wantReset = now.Truncate(time.Hour).Add(time.Hour).Sub(now)
			case limits.SlidingWindow:
				// In the next window, the count (now the previous one) must
				// decay by one request's worth: T/N more.
				wantReset = now.Truncate(time.Hour).Add(time.Hour).Sub(now) + time.Hour/n
			case limits.TokenBucket, limits.LeakyBucket:
				// One token, or one turn of the queue.
				wantReset = time.Hour / n
			case limits.SlidingLog:
				// The first hit leaves the window.
				wantReset = time.Hour
			}
			if d := r.RetryAfter - wantReset; d < -time.Second || d > time.Second {
				t.Errorf("retry = %s, want about %s", r.RetryAfter, wantReset)
			}
			if isWindow(alg) {
				key = windowKey(key, floorDiv(now.UnixMicro(), time.Hour.Microseconds()))
			}
			pttl, err := c.PTTL(ctx, key).Result()
			if err != nil || pttl <= 0 || pttl > 2*time.Hour {
				t.Errorf("PTTL = %s, %v; want a TTL of at most 2h", pttl, err)
			}
		})
	}
}

// waitPastBoundary waits, if Redis's clock is within seconds of a window
// boundary, until it has passed, so that a fixed window test stays in one
// window.
func waitPastBoundary(t testing.TB, c redis.UniversalClient, period time.Duration) {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := now.Truncate(period).Add(period).Sub(now); left < 10*time.Second {
		t.Logf("waiting %s for the window boundary", left)
		time.Sleep(left + 10*time.Millisecond)
	}
}

// TestConcurrent hits one key from many goroutines: exactly N are allowed,
// for every algorithm (a leaky bucket with a queue of N-1 and a deadline
// beyond its longest wait admits N at one instant).
func TestConcurrent(t *testing.T) {
	s, _, _ := setup(t, fixedClock(1_767_225_600_000_000+42))
	const n = 100
	for _, alg := range implemented {
		t.Run(alg.String(), func(t *testing.T) {
			key := "concurrent:" + alg.String()
			hit := limits.Hit{Key: key, Limit: allowing(alg, n), Cost: 1, MaxDelay: time.Hour}
			if got := hammer(t, s, []limits.Hit{hit}); got != n {
				t.Errorf("allowed %d, want exactly %d", got, n)
			}
		})
	}
}

// TestConcurrentJoint hits a joint run of 10/hour and 5/hour from many
// goroutines: exactly 5 runs are allowed, and the 10/hour key, which allows
// every hit on its own, is charged only by those 5.
func TestConcurrentJoint(t *testing.T) {
	s, _, _ := setup(t, fixedClock(1_767_225_600_000_000+42))
	pairs := [][2]limits.Algorithm{{limits.TokenBucket, limits.SlidingLog}, {limits.SlidingLog, limits.LeakyBucket}}
	for _, alg := range implemented {
		pairs = append(pairs, [2]limits.Algorithm{alg, alg})
	}
	for _, p := range pairs {
		t.Run(p[0].String()+"+"+p[1].String(), func(t *testing.T) {
			tag := fmt.Sprintf("{cj:%s:%s}", p[0], p[1])
			run := []limits.Hit{
				{Key: tag + "10", Limit: allowing(p[0], 10), Cost: 1, MaxDelay: time.Hour, Joint: true},
				{Key: tag + "5", Limit: allowing(p[1], 5), Cost: 1, MaxDelay: time.Hour},
			}
			if got := hammer(t, s, run); got != 5 {
				t.Errorf("allowed %d runs, want exactly 5", got)
			}
			peek := run[0]
			peek.Cost, peek.Joint = 0, false
			if r := decideOne(t, s, peek); r.Err != nil || !r.Allowed || r.Remaining != 5 {
				t.Errorf("peek at the 10/hour key: got %+v, want allowed with remaining 5 (5 consumed)", r)
			}
		})
	}
}

// hammer sends hits as one Decide call 20 times from each of 32 goroutines,
// and returns how many calls had every hit allowed. Any error fails t.
func hammer(t *testing.T, s *Store, hits []limits.Hit) int64 {
	t.Helper()
	const goroutines, callsEach = 32, 20
	var allowed, errs atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			res := make([]limits.Result, len(hits))
			for range callsEach {
				s.Decide(context.Background(), hits, res)
				all := true
				for _, r := range res {
					if r.Err != nil {
						errs.Add(1)
					}
					all = all && r.Err == nil && r.Allowed
				}
				if all {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Errorf("%d errors in %d calls", errs.Load(), goroutines*callsEach)
	}
	return allowed.Load()
}

// TestOutage stops Redis: a call must fail fast, on every hit, and the store
// must recover once Redis is back (with an empty script cache).
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL()}) // production timeouts
	s := New(c, Options{})
	hits := []limits.Hit{
		{Key: "o1", Limit: hourly(limits.FixedWindow, 10), Cost: 1},
		{Key: "o2", Limit: hourly(limits.SlidingWindow, 10), Cost: 1},
		{Key: "o3", Limit: hourly(limits.TokenBucket, 10), Cost: 1},
		{Key: "{o}4", Limit: hourly(limits.SlidingLog, 10), Cost: 1, Joint: true},
		{Key: "{o}5", Limit: allowing(limits.LeakyBucket, 10), Cost: 1},
	}
	res := make([]limits.Result, len(hits))
	s.Decide(context.Background(), hits, res)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("hit %d before the outage: %v", i, r.Err)
		}
	}

	srv.Stop()
	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		limit time.Duration
	}{
		{"deadline 1ms", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Millisecond)
		}, 200 * time.Millisecond},
		{"no deadline", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, 500 * time.Millisecond},
	} {
		ctx, cancel := tc.ctx()
		start := time.Now()
		s.Decide(ctx, hits, res)
		elapsed := time.Since(start)
		cancel()
		if elapsed > tc.limit {
			t.Errorf("%s: Decide took %s against a stopped Redis, want under %s", tc.name, elapsed, tc.limit)
		}
		for i, r := range res {
			if r.Err == nil {
				t.Errorf("%s: hit %d: got %+v, want an error", tc.name, i, r)
			}
		}
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Error("Ping against a stopped Redis: got nil, want an error")
	}
	// Many failed dials (more than the pool size) make go-redis answer with
	// the last dial error at once and probe in the background, once a
	// second: recovery then takes up to a second.
	for range 100 {
		s.Decide(context.Background(), hits, res)
	}

	srv.Restart()
	restarted := time.Now()
	defer func() { t.Logf("recovered %s after the restart", time.Since(restarted)) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.Decide(context.Background(), hits, res)
		var err error
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery 5s after Redis restarted: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, r := range res {
		if !r.Allowed || r.Remaining != 9 {
			t.Errorf("hit %d after restart: got %+v, want allowed with remaining 9 (fresh Redis)", i, r)
		}
	}
	// Ping takes a connection of its own, which go-redis may still refuse
	// with the cached dial error for up to its background probe's second.
	for {
		err := s.Ping(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping 5s after Redis restarted: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCluster runs the store on a three-master Redis Cluster: one pipeline
// fans out to every node, a flushed script cache on one node is handled, and
// a node down fails only its own hits.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, ClientOptions{Cluster: cl.Addrs(), Timeout: testTimeout})
	s := New(c, fixedClock(1_767_225_600_000_000))
	ctx := context.Background()

	var hits []limits.Hit
	for i := range 30 {
		hits = append(hits, limits.Hit{Key: fmt.Sprintf("{k%d}", i), Limit: allowing(implemented[i%len(implemented)], 10), Cost: 1})
	}
	// Joint runs of two keys of one hash tag: one script on one node.
	for i := range 10 {
		hits = append(hits,
			limits.Hit{Key: fmt.Sprintf("{r%d}:a", i), Limit: allowing(implemented[i%len(implemented)], 10), Cost: 1, Joint: true},
			limits.Hit{Key: fmt.Sprintf("{r%d}:b", i), Limit: allowing(implemented[(i+2)%len(implemented)], 10), Cost: 1})
	}
	res := make([]limits.Result, len(hits))
	check := func(step string, wantRemaining int64, skip func(i int) bool) {
		t.Helper()
		s.Decide(ctx, hits, res)
		for i, r := range res {
			if skip != nil && skip(i) {
				continue
			}
			if r.Err != nil || !r.Allowed || r.Remaining != wantRemaining {
				t.Errorf("%s: hit %s: got %+v, want allowed with remaining %d", step, hits[i].Key, r, wantRemaining)
			}
		}
	}
	check("first", 9, nil)
	if _, err := cl.Nodes[0].Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	check("after SCRIPT FLUSH on one node", 8, nil)

	// Which hits live on node 0?
	onNode0 := make([]bool, len(hits))
	var n0 int
	for i, h := range hits {
		// Any key type answers EXISTS; a key of another node's slot is MOVED.
		_, err := cl.Nodes[0].Do("EXISTS", h.Key)
		onNode0[i] = err == nil
		if onNode0[i] {
			n0++
		}
	}
	if n0 == 0 || n0 == len(hits) {
		t.Fatalf("%d of %d keys on node 0; want some but not all", n0, len(hits))
	}
	cl.Nodes[0].Stop()
	// The production deadline: go-redis retries node 0's commands with
	// backoff until it expires, then sets the deadline error on every command
	// without one, those answered by the other nodes included.
	ctx2, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	start := time.Now()
	s.Decide(ctx2, hits, res)
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("node 0 down: Decide took %s, want about %s", elapsed, DefaultTimeout)
	}
	for i, r := range res {
		switch {
		case onNode0[i] && r.Err == nil:
			t.Errorf("node 0 down: hit %s on node 0: got %+v, want an error", hits[i].Key, r)
		case !onNode0[i] && (r.Err != nil || r.Remaining != 7):
			t.Errorf("node 0 down: hit %s on another node: got %+v, want allowed with remaining 7", hits[i].Key, r)
		}
	}
}
