package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestNativeExactUnderConcurrency: several stores (instances, each with its
// own connections and clock estimate) and many goroutines each hit one key
// decided with native commands, with costs from 1 to 3, peeks and, in the
// second round, refunds, on Redis's own clock. The allowed costs never add
// up past N plus what refunds gave back; a window's counter left in Redis
// is exactly what the allowed hits and the refunds made it (every refusal's
// cost given back), and with count_refused every cost is counted, refused
// or not; a bucket's TAT has moved by one interval per allowed unit (its
// refill over the test is a few thousandths of a token), and a sliding
// log holds a member per allowed unit.
func TestNativeExactUnderConcurrency(t *testing.T) {
	const (
		instances  = 3
		goroutines = 16
		callsEach  = 40
		n          = 100
	)
	_, c, srv := setup(t, Options{})
	stores := make([]*Store, instances)
	for i := range stores {
		ci := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
		stores[i] = New(ci, Options{})
		defer stores[i].Close()
	}
	ctx := context.Background()
	waitPastBoundary(t, c, time.Hour)
	for _, alg := range implemented {
		for _, countRefused := range []bool{false, true} {
			for _, refunds := range []bool{false, true} {
				l := limits.Limit{Algorithm: alg, Requests: n, Period: time.Hour, CountRefused: countRefused}
				if alg == limits.LeakyBucket {
					l.Burst = n - 1 // a queue of N − 1 behind the request in service
				}
				name := fmt.Sprintf("%s/refunds=%v", l, refunds)
				t.Run(name, func(t *testing.T) {
					key := "exact:" + name
					var allowed, refunded, charged atomic.Int64
					fanOut(stores, instances*goroutines, 7, func(s *Store, rng *rand.Rand) {
						res := make([]limits.Result, 1)
						for range callsEach {
							cost := []int64{1, 1, 2, 3, 0}[rng.IntN(5)]
							if refunds && rng.IntN(6) == 0 {
								cost = -int64(1 + rng.IntN(3))
							}
							s.Decide(ctx, []limits.Hit{{Key: key, Limit: l, Cost: cost, MaxDelay: time.Hour}}, res)
							r := res[0]
							switch {
							case r.Err != nil:
								t.Errorf("cost %d: %v", cost, r.Err)
								return
							case cost < 0:
								refunded.Add(-cost)
							case cost > 0 && r.Allowed:
								allowed.Add(cost)
							}
							if cost > 0 {
								charged.Add(cost)
							}
						}
					})
					if a, r := allowed.Load(), refunded.Load(); a > n+r {
						t.Errorf("allowed %d units, want at most N + refunded = %d", a, n+r)
					}
					if alg == limits.SlidingLog {
						got := c.ZCard(ctx, key).Val()
						t.Logf("allowed %d, refunded %d, charged %d, %d members", allowed.Load(), refunded.Load(), charged.Load(), got)
						switch {
						case !refunds && !countRefused && got != allowed.Load():
							t.Errorf("%d members, want the allowed costs, %d (every refusal taken out)", got, allowed.Load())
						case got > 2*n:
							t.Errorf("%d members, above 2N", got)
						}
						return
					}
					if isBucket(alg) {
						raw, err := c.Get(ctx, key).Bytes()
						tat, _, ok := decodeBucket(raw)
						if err != nil || !ok {
							t.Fatalf("GET %s: %q, %v", key, raw, err)
						}
						ahead := tat - time.Now().UnixNano()
						units := (ahead + limits.Interval(l) - 1) / limits.Interval(l)
						t.Logf("allowed %d, refunded %d, charged %d, TAT %d intervals ahead", allowed.Load(), refunded.Load(), charged.Load(), units)
						if !refunds && !countRefused && (units > allowed.Load() || units < allowed.Load()-1) {
							t.Errorf("TAT %d intervals ahead, want the allowed units, %d", units, allowed.Load())
						}
						return
					}
					w := floorDiv(time.Now().UnixMicro(), l.PeriodMicros())
					got, err := counter(ctx, c, windowKey(key, w))
					if err != nil {
						// The test crossed an hour boundary of Redis's clock,
						// or the key is gone: nothing to compare.
						t.Fatalf("GET counter: %v", err)
					}
					t.Logf("allowed %d, refunded %d, charged %d, counter %d", allowed.Load(), refunded.Load(), charged.Load(), got)
					switch {
					case countRefused && !refunds:
						if want := min(charged.Load(), 2*n); got != want {
							t.Errorf("counter %d, want every cost charged, %d, up to 2N", got, want)
						}
					case !countRefused && !refunds:
						if got != allowed.Load() {
							t.Errorf("counter %d, want the allowed costs, %d (every refusal given back)", got, allowed.Load())
						}
					case !countRefused:
						if got > n || got > allowed.Load() {
							t.Errorf("counter %d, want at most N and at most the allowed costs %d", got, allowed.Load())
						}
					}
				})
			}
		}
	}
}

// TestBucketsAcrossSkew: two instances whose clocks differ by 5 ms share a
// bucket of 30 a day, a burst: the one ahead takes the first token, the one
// behind the others. It is decided at the later instant the bucket has
// seen, so it finds all the burst the first one left, with every remaining
// 28 … 0 once, and is refused the 31st, as one instance would be.
func TestBucketsAcrossSkew(t *testing.T) {
	const n = 30
	base := int64(1_767_225_600_000_000)
	_, c, srv := setup(t, Options{})
	ahead := New(c, Options{Clock: func() int64 { return base + 5000 }})
	behind := New(newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout}), Options{Clock: func() int64 { return base }})
	for _, l := range []limits.Limit{
		{Algorithm: limits.TokenBucket, Requests: n, Period: 24 * time.Hour},
		{Algorithm: limits.LeakyBucket, Requests: n, Period: 24 * time.Hour, Burst: n - 1},
	} {
		t.Run(l.String(), func(t *testing.T) {
			h := limits.Hit{Key: "skew:" + l.String(), Limit: l, Cost: 1, MaxDelay: 24 * time.Hour}
			if r := decideOne(t, ahead, h); r.Err != nil || !r.Allowed || r.Remaining != n-1 {
				t.Fatalf("first, on the instance ahead: got %+v, want allowed, remaining %d", r, n-1)
			}
			for i := 1; i < n; i++ {
				if r := decideOne(t, behind, h); r.Err != nil || !r.Allowed || r.Remaining != int64(n-1-i) {
					t.Fatalf("hit %d, on the instance behind: got %+v, want allowed, remaining %d", i+1, r, n-1-i)
				}
			}
			if r := decideOne(t, behind, h); r.Err != nil || r.Allowed {
				t.Fatalf("hit %d: got %+v, want refused", n+1, r)
			}
		})
	}
}

// A refund from an instance whose clock trails can leave a bucket's state
// below the latest instant the key has seen: it clamps at its own. A hit
// from an instance between the two is then decided at the later instant,
// while Redis moves the bucket from its own: the two states differ by the
// difference of the instants, and the hit is answered, not failed as a
// disagreement (TestNativeExactUnderConcurrency met it now and then).
func TestBucketsAfterTrailingRefund(t *testing.T) {
	base := int64(1_767_225_600_000_000)
	_, c, _ := setup(t, Options{})
	at := func(off int64) *Store {
		s := New(c, Options{Clock: func() int64 { return base + off }})
		t.Cleanup(s.Close)
		return s
	}
	ahead, trailing, between := at(20), at(0), at(10)
	for _, l := range []limits.Limit{
		{Algorithm: limits.TokenBucket, Requests: 100, Period: time.Hour},
		{Algorithm: limits.TokenBucket, Requests: 100, Period: time.Hour, CountRefused: true},
		{Algorithm: limits.LeakyBucket, Requests: 100, Period: time.Hour, Burst: 99},
		{Algorithm: limits.LeakyBucket, Requests: 100, Period: time.Hour, Burst: 99, CountRefused: true},
	} {
		t.Run(l.String(), func(t *testing.T) {
			h := limits.Hit{Key: "refund:" + l.String(), Limit: l, Cost: 1, MaxDelay: time.Hour}
			if r := decideOne(t, ahead, h); r.Err != nil || !r.Allowed {
				t.Fatalf("ahead: %+v", r)
			}
			refund := h
			refund.Cost = -3
			if r := decideOne(t, trailing, refund); r.Err != nil {
				t.Fatalf("refund from the trailing instance: %+v", r)
			}
			for i := range 3 {
				if r := decideOne(t, between, h); r.Err != nil || !r.Allowed {
					t.Fatalf("hit %d from the instance between: %+v, want allowed", i+1, r)
				}
			}
		})
	}
}

// counter reads a window counter: its BITFIELD u63.
func counter(ctx context.Context, c redis.UniversalClient, key string) (int64, error) {
	v, err := c.BitField(ctx, key, "get", "u63", 0).Result()
	if err != nil || len(v) != 1 {
		return 0, fmt.Errorf("BITFIELD %s: %v, %v", key, v, err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n == 0 {
		return 0, fmt.Errorf("counter %s: gone (%v)", key, err)
	}
	return v[0], nil
}

// overtaker is a hook that, before each pipeline of the client it is on,
// has another store hit the key ahead of it: a store whose clock runs
// further ahead at each of its hits.
type overtaker struct {
	ahead *Store
	hit   limits.Hit
	calls atomic.Int64
}

func (*overtaker) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*overtaker) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (o *overtaker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		o.calls.Add(1)
		res := make([]limits.Result, 1)
		o.ahead.Decide(ctx, []limits.Hit{o.hit}, res)
		if res[0].Err != nil || !res[0].Allowed {
			return fmt.Errorf("the store ahead: %+v", res[0])
		}
		return next(ctx, cmds)
	}
}

// TestBucketRefusedAgain reaches the end of the bucket's second round trips:
// a hit that Redis refuses at its own instant while the algorithm lets it
// in at the later instant the key has seen goes again at that instant; when
// another instance, its clock ahead, moves the key on and takes the token
// before each attempt, the third attempt is answered as Redis decided it: a
// refusal at the instant it was refused at, with the wait from there, and
// no error (stricter than the later instant, never looser).
func TestBucketRefusedAgain(t *testing.T) {
	base := int64(1_767_225_600_000_000)
	srv := redistest.Start(t)
	l := limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: time.Second, Burst: 2}
	hit := limits.Hit{Key: "again", Limit: l, Cost: 1}
	var aheadAt atomic.Int64 // each hit of the store ahead is 5 s after the last
	ahead := New(newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout}), Options{Batching: BatchOff,
		Clock: func() int64 { return base + aheadAt.Add(5_000_000) }})
	defer ahead.Close()
	o := &overtaker{ahead: ahead, hit: hit}
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	// Connected first: the handshake of a connection is a pipeline too.
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	c.AddHook(o)
	behind := New(c, Options{Batching: BatchOff, Clock: func() int64 { return base }})
	defer behind.Close()

	r := decideOne(t, behind, hit)
	if r.Err != nil || r.Allowed {
		t.Fatalf("got %+v, want refused, without an error", r)
	}
	if got := o.calls.Load(); got != 3 {
		t.Errorf("%d pipelines, want 3 (the hit, and twice again)", got)
	}
	// Refused at the second store's second instant (base + 10 s), where the
	// third hit ahead (at base + 15 s) had left the bucket full at 16 s:
	// one token back at 15 s, 5 s on.
	if want := 5 * time.Second; r.RetryAfter != want {
		t.Errorf("RetryAfter %s, want %s", r.RetryAfter, want)
	}
	raw, err := c.Get(context.Background(), hit.Key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if tat, _, _ := decodeBucket(raw); tat != (base+16_000_000)*1000 {
		t.Errorf("TAT %d, want the third hit ahead's, %d: the refused hit charged nothing", tat, (base+16_000_000)*1000)
	}
}

// expireBetween is a hook that, once armed, deletes key after the first
// pipeline that charges it, as Redis expiring the key between a charge and
// its undo would.
type expireBetween struct {
	c     redis.UniversalClient
	key   string
	armed atomic.Bool
}

func (*expireBetween) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*expireBetween) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (e *expireBetween) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if k, _ := redispipe.CmdKey(c); k == e.key && c.Name() == "bitfield" && e.armed.Swap(false) {
				e.c.Del(ctx, e.key)
			}
		}
		return err
	}
}

// TestUndoNeverCredit: an undo, or a refund, that finds less than it takes
// back (the counter expired between a refused hit's charge and its undo, a
// refund larger than the count) stops at zero and leaves a TTL: never a
// credit that would let more hits in than the limit.
func TestUndoNeverCredit(t *testing.T) {
	const now = 1_767_225_600_000_000
	ctx := context.Background()
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	inspect := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	l := hourly(limits.FixedWindow, 3)
	key := windowKey("credit", floorDiv(now, l.PeriodMicros()))
	e := &expireBetween{c: inspect, key: key}
	c.AddHook(e)
	s := New(c, Options{Clock: func() int64 { return now }, Batching: BatchOff})
	defer s.Close()
	decide := func(what string, cost int64, allowed bool, remaining int64) {
		t.Helper()
		r := decideOne(t, s, limits.Hit{Key: "credit", Limit: l, Cost: cost})
		if r.Err != nil || r.Allowed != allowed || r.Remaining != remaining {
			t.Fatalf("%s, cost %d: got %+v, want allowed %v, remaining %d", what, cost, r, allowed, remaining)
		}
	}
	zero := func(what string) {
		t.Helper()
		if got, err := counter(ctx, inspect, key); err != nil || got != 0 {
			t.Fatalf("%s: counter %d, %v; want 0", what, got, err)
		}
		if ttl := inspect.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Errorf("%s: PTTL %v, want one", what, ttl)
		}
	}
	decide("filling", 3, true, 0)
	e.armed.Store(true)
	decide("refused, its counter gone before the undo", 1, false, 0)
	zero("after the undo")
	decide("after the undo", 3, true, 0)
	decide("over", 1, false, 0)
	decide("a refund larger than the count", -10, true, 3)
	zero("after the refund")
	decide("after the refund", 3, true, 0)
	decide("over again", 1, false, 0)
}

// TestJointExactUnderConcurrency: several stores and many goroutines send
// one descriptor's two limits as a joint run, of every algorithm beside a
// tighter fixed window (and a bucket beside a log), on Redis's own clock,
// with costs from 1 to 3 and peeks. The allowed runs never add up past the
// tighter limit, and what the store keeps holds the allowed units alone
// (every refused run undone): the window's counter and the log's members
// exactly, a bucket's TAT no less, and no more than the allowed units and
// the time its undos keep (bucket.go).
func TestJointExactUnderConcurrency(t *testing.T) {
	const (
		instances  = 3
		goroutines = 12
		callsEach  = 30
		n, tighter = 100, 60
	)
	_, c, srv := setup(t, Options{})
	stores := make([]*Store, instances)
	for i := range stores {
		stores[i] = New(newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout}), Options{})
		defer stores[i].Close()
	}
	ctx := context.Background()
	waitPastBoundary(t, c, time.Hour)
	window := limits.Limit{Algorithm: limits.FixedWindow, Requests: tighter, Period: time.Hour}
	var pairs [][2]limits.Limit
	for _, alg := range implemented {
		pairs = append(pairs, [2]limits.Limit{{Algorithm: alg, Requests: n, Period: time.Hour}, window})
	}
	pairs = append(pairs, [2]limits.Limit{{Algorithm: limits.TokenBucket, Requests: n, Period: time.Hour},
		{Algorithm: limits.SlidingLog, Requests: tighter, Period: time.Hour}})
	for _, p := range pairs {
		if p[0].Algorithm == limits.LeakyBucket {
			p[0].Burst = n - 1
		}
		name := p[0].String() + "+" + p[1].String()
		t.Run(name, func(t *testing.T) {
			keys := [2]string{"{jx:" + name + "}:0", "{jx:" + name + "}:1"}
			var allowed atomic.Int64
			fanOut(stores, instances*goroutines, 11, func(s *Store, rng *rand.Rand) {
				res := make([]limits.Result, 2)
				for range callsEach {
					cost := []int64{1, 1, 2, 3, 0}[rng.IntN(5)]
					run := []limits.Hit{
						{Key: keys[0], Limit: p[0], Cost: cost, MaxDelay: time.Hour, Joint: true},
						{Key: keys[1], Limit: p[1], Cost: cost, MaxDelay: time.Hour},
					}
					s.Decide(ctx, run, res)
					if res[0].Err != nil || res[1].Err != nil {
						t.Errorf("cost %d: %v, %v", cost, res[0].Err, res[1].Err)
						return
					}
					if cost > 0 && res[0].Allowed && res[1].Allowed {
						allowed.Add(cost)
					}
				}
			})
			a := allowed.Load()
			if a > tighter {
				t.Fatalf("allowed %d units, want at most %d", a, tighter)
			}
			for k, l := range p {
				checkJointKey(t, c, keys[k], l, a, instances*goroutines)
			}
		})
	}
}

// checkJointKey requires that what key holds for limit l counts the allowed
// units: a window's counter and a log's members exactly, a bucket's TAT no
// less, and no more than one unit per caller more (what undos keep).
func checkJointKey(t *testing.T, c redis.UniversalClient, key string, l limits.Limit, allowed, callers int64) {
	t.Helper()
	ctx := context.Background()
	var got int64
	var err error
	switch {
	case isWindow(l.Algorithm):
		got, err = counter(ctx, c, windowKey(key, floorDiv(time.Now().UnixMicro(), l.PeriodMicros())))
	case l.Algorithm == limits.SlidingLog:
		got, err = c.ZCard(ctx, key).Result()
	default:
		var raw []byte
		raw, err = c.Get(ctx, key).Bytes()
		tat, _, _ := decodeBucket(raw)
		i := limits.Interval(l)
		got = (tat - time.Now().UnixNano() + i - 1) / i
		t.Logf("%s: allowed %d, TAT %d intervals ahead", l, allowed, got)
		if err == nil && (got < allowed-1 || got > allowed+callers) {
			t.Errorf("%s: TAT %d intervals ahead, want the allowed units %d, and at most one per caller more", l, got, allowed)
		}
		return
	}
	if err != nil || got != allowed {
		t.Errorf("%s: %d counted, %v; want the allowed units, %d", l, got, err, allowed)
	}
}

// fanOut runs callers goroutines, the g-th on stores[g % len(stores)] with
// a generator of its own (g and seed), and waits for them and for the
// stores' undos.
func fanOut(stores []*Store, callers int, seed uint64, f func(s *Store, rng *rand.Rand)) {
	var wg sync.WaitGroup
	for g := range callers {
		s := stores[g%len(stores)]
		wg.Go(func() { f(s, rand.New(rand.NewPCG(uint64(g), seed))) })
	}
	wg.Wait()
	for _, s := range stores {
		s.settle()
	}
}
