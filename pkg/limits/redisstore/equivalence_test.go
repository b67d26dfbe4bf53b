package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

// eqCase is one limit under test, with the MaxDelay of its hits (leaky
// buckets only; zero is no bound).
type eqCase struct {
	limit    limits.Limit
	maxDelay time.Duration
}

func (c eqCase) String() string {
	if c.maxDelay != 0 {
		return fmt.Sprintf("%s max_delay=%s", c.limit, c.maxDelay)
	}
	return c.limit.String()
}

// equivalenceCases are limits whose periods do not divide evenly by N, with
// buckets whose burst differs from N, down to microsecond periods and up to
// the largest values a limit may hold, each algorithm also with
// count_refused, and leaky buckets with and without a deadline.
var equivalenceCases = func() []eqCase {
	type L = limits.Limit
	const (
		fw, sw, tb = limits.FixedWindow, limits.SlidingWindow, limits.TokenBucket
		sl, lb     = limits.SlidingLog, limits.LeakyBucket
		us, s      = time.Microsecond, time.Second
	)
	cr := func(l L) L { l.CountRefused = true; return l }
	return []eqCase{
		{limit: L{Algorithm: fw, Requests: 3, Period: s}},
		{limit: L{Algorithm: fw, Requests: 7, Period: 10 * s}},
		{limit: L{Algorithm: fw, Requests: 3, Period: 7 * us}},
		{limit: L{Algorithm: fw, Requests: 1000, Period: time.Hour}},
		{limit: cr(L{Algorithm: fw, Requests: 3, Period: s})},
		{limit: cr(L{Algorithm: fw, Requests: 7, Period: 10 * s})},

		{limit: L{Algorithm: sw, Requests: 3, Period: s}},
		{limit: L{Algorithm: sw, Requests: 7, Period: 10 * s}},
		{limit: L{Algorithm: sw, Requests: 3, Period: 7 * us}},
		{limit: L{Algorithm: sw, Requests: 11, Period: time.Minute}},
		{limit: L{Algorithm: sw, Requests: limits.MaxRequests, Period: limits.MaxPeriod}},
		{limit: cr(L{Algorithm: sw, Requests: 3, Period: s})},
		{limit: cr(L{Algorithm: sw, Requests: 7, Period: 10 * s})},
		{limit: cr(L{Algorithm: sw, Requests: limits.MaxRequests, Period: limits.MaxPeriod})},

		{limit: L{Algorithm: tb, Requests: 3, Period: s, Burst: 5}},
		{limit: L{Algorithm: tb, Requests: 7, Period: 10 * s, Burst: 2}},
		{limit: L{Algorithm: tb, Requests: 10, Period: s}},
		{limit: L{Algorithm: tb, Requests: 3, Period: 7 * us, Burst: 4}},
		{limit: L{Algorithm: tb, Requests: limits.MaxRequests, Period: limits.MaxPeriod, Burst: 3}},
		{limit: cr(L{Algorithm: tb, Requests: 3, Period: s, Burst: 5})},
		{limit: cr(L{Algorithm: tb, Requests: 7, Period: 10 * s, Burst: 2})},
		{limit: cr(L{Algorithm: tb, Requests: limits.MaxRequests, Period: limits.MaxPeriod, Burst: 3})},

		{limit: L{Algorithm: sl, Requests: 1, Period: s}},
		{limit: L{Algorithm: sl, Requests: 3, Period: s}},
		{limit: L{Algorithm: sl, Requests: 3, Period: 7 * us}},
		{limit: L{Algorithm: sl, Requests: 10, Period: 10 * s}},
		{limit: L{Algorithm: sl, Requests: 10, Period: time.Minute}},
		{limit: L{Algorithm: sl, Requests: 100, Period: time.Minute}},
		{limit: cr(L{Algorithm: sl, Requests: 1, Period: s})},
		{limit: cr(L{Algorithm: sl, Requests: 3, Period: 7 * us})},
		{limit: cr(L{Algorithm: sl, Requests: 10, Period: 10 * s})},

		{limit: L{Algorithm: lb, Requests: 3, Period: s}},
		{limit: L{Algorithm: lb, Requests: 7, Period: 10 * s, Burst: 2}},
		{limit: L{Algorithm: lb, Requests: 10, Period: s, Burst: 5}},
		{limit: L{Algorithm: lb, Requests: 3, Period: 700 * us, Burst: 2}},
		{limit: L{Algorithm: lb, Requests: limits.MaxRequests, Period: limits.MaxPeriod, Burst: 5}},
		{limit: L{Algorithm: lb, Requests: 7, Period: 10 * s, Burst: 5}, maxDelay: 2 * s},
		{limit: L{Algorithm: lb, Requests: 10, Period: s, Burst: 5}, maxDelay: 150 * time.Millisecond},
		{limit: L{Algorithm: lb, Requests: 3, Period: 700 * us, Burst: 5}, maxDelay: 300 * us},
		{limit: L{Algorithm: lb, Requests: 3, Period: 700 * us, Burst: 5}, maxDelay: 500 * time.Nanosecond},
		{limit: L{Algorithm: lb, Requests: 3, Period: s}, maxDelay: 100 * time.Millisecond},
		{limit: cr(L{Algorithm: lb, Requests: 3, Period: s})},
		{limit: cr(L{Algorithm: lb, Requests: 7, Period: 10 * s, Burst: 2})},
		{limit: cr(L{Algorithm: lb, Requests: 10, Period: s, Burst: 5}), maxDelay: 150 * time.Millisecond},

		{limit: L{Algorithm: limits.Concurrency, Requests: 1, Period: s}},
		{limit: L{Algorithm: limits.Concurrency, Requests: 3, Period: s}},
		{limit: L{Algorithm: limits.Concurrency, Requests: 3, Period: 7 * us}},
		{limit: L{Algorithm: limits.Concurrency, Requests: 10, Period: 10 * s}},
		{limit: L{Algorithm: limits.Concurrency, Requests: 100, Period: time.Minute}},
		{limit: cr(L{Algorithm: limits.Concurrency, Requests: 1, Period: s})},
		{limit: cr(L{Algorithm: limits.Concurrency, Requests: 3, Period: 7 * us})},
		{limit: cr(L{Algorithm: limits.Concurrency, Requests: 10, Period: 10 * s})},
	}
}()

// iterations is the number of steps per sequence: RLS_PROPERTY_ITERATIONS,
// 300 by default.
func iterations(t testing.TB) int {
	v := os.Getenv("RLS_PROPERTY_ITERATIONS")
	if v == "" {
		return 300
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("RLS_PROPERTY_ITERATIONS=%q: want a positive integer", v)
	}
	return n
}

// extraSeed is RLS_PROPERTY_SEED, mixed into every sequence's seed so that long
// runs can explore other sequences; 0 by default.
func extraSeed(t testing.TB) uint64 {
	v := os.Getenv("RLS_PROPERTY_SEED")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("RLS_PROPERTY_SEED=%q: want an unsigned integer", v)
	}
	return n
}

// model keeps one key's state as a store does around limits.DecideWithin,
// with the conversion of Hit.MaxDelay that the conformance suite (and so the
// embedded store) uses.
type model struct {
	state    limits.State
	expireAt int64
}

// decide is the decision on the model's state at now, not yet applied.
func (m *model) decide(h limits.Hit, now int64) limits.Decision {
	s := m.state
	if now >= m.expireAt {
		s = limits.State{}
	}
	return limits.DecideWithin(h.Limit, s, h.Cost, now, h.MaxDelayMicros())
}

// apply stores a decision's state, as a store does when it charges.
func (m *model) apply(d limits.Decision, now int64) {
	if !d.Changed {
		return
	}
	if d.State.Live && d.ExpireAt > now {
		m.state, m.expireAt = d.State, d.ExpireAt
	} else {
		m.state, m.expireAt = limits.State{}, 0
	}
}

// decideCall is the reference of Store.Decide for one call: each hit of a
// run of joint hits (on keys that differ) is decided on its own; a run all
// allowed charges every limit, a refused run only its count_refused limits.
func decideCall(models []*model, hits []limits.Hit, now int64) []limits.Decision {
	want := make([]limits.Decision, len(hits))
	for first := 0; first < len(hits); {
		last := first
		for last < len(hits)-1 && hits[last].Joint {
			last++
		}
		allowed := true
		for i := first; i <= last; i++ {
			want[i] = models[i].decide(hits[i], now)
			allowed = allowed && want[i].Result.Allowed
		}
		for i := first; i <= last; i++ {
			if allowed || hits[i].Limit.CountRefused {
				models[i].apply(want[i], now)
			}
		}
		first = last + 1
	}
	return want
}

// sequence is one key under test: its limit, its model and what Redis held
// after the previous step.
type sequence struct {
	key   string
	c     eqCase
	model model
	// restarted is set once Redis expired the key before the test read it:
	// the embedded store, which kept it, is no longer compared, on this
	// key or on any joint run that holds it (the run's verdict reads it),
	// nor on the other keys of such a run.
	restarted bool
}

// diverged reports, for each hit, whether its run (the hits chained by
// Joint) holds a sequence that was restarted.
func diverged(hits []limits.Hit, order []int, seqs []*sequence) []bool {
	out := make([]bool, len(hits))
	for start := 0; start < len(hits); {
		end, tainted := start, false
		for ; ; end++ {
			tainted = tainted || seqs[order[end]].restarted
			if !hits[end].Joint || end == len(hits)-1 {
				break
			}
		}
		for i := start; i <= end; i++ {
			out[i] = tainted
		}
		start = end + 1
	}
	return out
}

// TestEquivalence feeds the same pseudo-random sequences of hits to the Go
// algorithms (limits.DecideWithin on a model of each key), to the embedded
// store and to this store's native commands, with explicit
// instants, and requires the same Allowed, Remaining, RetryAfter,
// ResetAfter and Delay at every step, the same state in Redis (a window's
// counts, a bucket's TAT, a sliding log's entries inside the window), and
// a key TTL no shorter than the state's life.
//
// Redis expires keys on its own clock, which does not follow the test's
// instants: after checking the TTL of a step, the test removes it (PERSIST),
// so that the state stays until the test's instants make it stale. A stale
// state must then decide exactly as an absent key, which is what ExpireAt
// promises.
func TestEquivalence(t *testing.T) {
	steps := iterations(t)
	var now int64
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	for i, ec := range equivalenceCases {
		t.Run(fmt.Sprintf("%d/%s", i, ec), func(t *testing.T) {
			seqs := []*sequence{{key: fmt.Sprintf("eq:%d", i), c: ec}}
			runSequences(t, s, c, &now, seqs, steps, uint64(i), singles)
		})
	}
	// All cases at once: one Decide call, one pipeline, per step.
	t.Run("batched", func(t *testing.T) {
		var seqs []*sequence
		for i, ec := range equivalenceCases {
			seqs = append(seqs, &sequence{key: fmt.Sprintf("eqb:%d", i), c: ec})
		}
		runSequences(t, s, c, &now, seqs, steps, 1000, singles)
	})
}

// TestJointEquivalence sends random runs of two or three joint hits, on keys
// whose limits mix every algorithm with and without count_refused, and
// requires the decisions, TTLs and states of decideCall: each hit decided on
// its own, the run charged all or nothing (count_refused limits always).
// Half the seeds give every hit of a run its own cost (refunds beside
// charges and peeks, which the store holds back until the run's verdict),
// half one cost for the run, as the service sends a descriptor's limits.
func TestJointEquivalence(t *testing.T) {
	steps := iterations(t)
	var now int64
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x701e7^extraSeed(t)))
			// Six keys of one descriptor (one hash tag), each with its own
			// limit; small limits and short periods, so that refusals,
			// debts and expiries are frequent.
			var seqs []*sequence
			for k := range 6 {
				ec := equivalenceCases[rng.IntN(len(equivalenceCases))]
				for ec.limit.Requests > 100 || ec.limit.Period > time.Minute {
					ec = equivalenceCases[rng.IntN(len(equivalenceCases))]
				}
				seqs = append(seqs, &sequence{key: fmt.Sprintf("{joint%d}:%d", seed, k), c: ec})
			}
			for _, q := range seqs {
				t.Logf("%s: %s", q.key, q.c)
			}
			plan := jointRuns
			if seed%2 == 1 {
				plan = sameCost(jointRuns)
			}
			runSequences(t, s, c, &now, seqs, steps, 2000+seed, plan)
		})
	}
}

// planner picks the hits of a step: which sequences, in which order, and
// which are joint with the next; shared, when set, has every hit of a run
// take the cost of its first.
type planner func(rng *rand.Rand, n int) (order []int, joint []bool, shared bool)

// sameCost is plan with one cost per run.
func sameCost(plan planner) planner {
	return func(rng *rand.Rand, n int) ([]int, []bool, bool) {
		order, joint, _ := plan(rng, n)
		return order, joint, true
	}
}

// singles hits every sequence once, none joint.
func singles(_ *rand.Rand, n int) ([]int, []bool, bool) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order, make([]bool, n), false
}

// jointRuns hits a random subset of the sequences, in random order, cut into
// runs of two or three (a lone hit at the end when one is left).
func jointRuns(rng *rand.Rand, n int) ([]int, []bool, bool) {
	order := rng.Perm(n)[:2+rng.IntN(n-1)]
	joint := make([]bool, len(order))
	for i := 0; i < len(order); {
		size := min(2+rng.IntN(2), len(order)-i)
		for k := i; k < i+size-1; k++ {
			joint[k] = true
		}
		i += size
	}
	return order, joint, false
}

func runSequences(t *testing.T, s *Store, c redis.UniversalClient, now *int64, seqs []*sequence, steps int, seed uint64, plan planner) {
	ctx := context.Background()
	resets, decided := 0, 0
	defer func() {
		// A handful is expected with 1 ms TTLs on a slow machine; many
		// would mean that the keys expire too early.
		if resets > 0 {
			t.Logf("%d of %d decisions: the key expired in real time before the test read it; sequence restarted", resets, decided)
		}
		if resets > decided/10 {
			t.Errorf("too many keys expired before the test read them")
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 0x5eed^extraSeed(t)))
	*now = 1_767_225_600_000_000 + rng.Int64N(1_000_000_000_000)
	// The embedded store, on the same instants, answers as the model does.
	mem := memory.New(memory.Options{Now: func() int64 { return *now }})
	defer func() { _ = mem.Close() }()
	for step := range steps {
		// Keep instants where every value the algorithms compute, up to
		// now+2T for the longest period, stays below 2^53: near the bound,
		// long jumps become steps of at most a second.
		adv := advance(rng, seqs[rng.IntN(len(seqs))].c.limit)
		if room := maxNow - *now; adv > room/2 {
			adv = rng.Int64N(min(room/2, 1_000_000) + 1)
		}
		*now += adv
		order, joint, shared := plan(rng, len(seqs))
		hits := make([]limits.Hit, len(order))
		models := make([]*model, len(order))
		before := make([]model, len(order))
		for i, k := range order {
			q := seqs[k]
			cost := pickCost(rng, q.c.limit)
			if shared && i > 0 && joint[i-1] {
				cost = hits[i-1].Cost
			}
			hits[i] = limits.Hit{Key: q.key, Limit: q.c.limit, Cost: cost, MaxDelay: q.c.maxDelay, Joint: joint[i]}
			models[i] = &q.model
			before[i] = q.model
		}
		want := decideCall(models, hits, *now)
		res, embedded := make([]limits.Result, len(hits)), make([]limits.Result, len(hits))
		start := time.Now()
		s.Decide(ctx, hits, res)
		decided += len(hits)
		mem.Decide(ctx, hits, embedded)
		apart := diverged(hits, order, seqs)
		for i, k := range order {
			// A run that read a restarted key may have charged the
			// embedded store where Redis did not: every key of it is
			// apart from then on.
			seqs[k].restarted = seqs[k].restarted || apart[i]
		}

		for i, k := range order {
			q := seqs[k]
			h, w, got := hits[i], want[i], res[i]
			if got.Err != nil || got != w.Result {
				t.Fatalf("step %d, hit %d of %d, %s (joint %v), cost %d, max delay %s, now %d, Go state %+v: Redis got %s (err %v); Go want %s",
					step, i, len(hits), q.c.limit, h.Joint, h.Cost, h.MaxDelay, *now, before[i], format(got), got.Err, format(w.Result))
			}
			if e := embedded[i]; e != w.Result && !apart[i] {
				t.Fatalf("step %d, hit %d of %d, %s (joint %v), cost %d, now %d: the embedded store got %s (err %v); Go want %s",
					step, i, len(hits), q.c.limit, h.Joint, h.Cost, *now, format(e), e.Err, format(w.Result))
			}
		}

		resets += checkState(t, c, seqs, order, step, *now, start)
	}
}

// checkState reads what the store left under the keys of the sequences a
// step hit, order, and makes it permanent, then compares it with their
// models (checkWindows, checkBucket, checkLog). It returns how many
// sequences it restarted, having deleted their keys: those that Redis's
// own clock expired before the test could read them, in the real time
// since the step's Decide started.
func checkState(t *testing.T, c redis.UniversalClient, seqs []*sequence, order []int, step int, now int64, start time.Time) int {
	ctx := context.Background()
	var touched []int
	inspects := map[int][]inspection{}
	pipe := c.TxPipeline()
	win := map[int]int64{} // the window of a window sequence's step
	for _, k := range order {
		if inspects[k] != nil {
			continue
		}
		touched = append(touched, k)
		l := seqs[k].c.limit
		keys := []string{seqs[k].key}
		if isWindow(l.Algorithm) {
			win[k] = limits.WindowFrame(l, now).W
			keys = []string{windowKey(seqs[k].key, win[k]), windowKey(seqs[k].key, win[k]-1)}
		}
		for _, key := range keys {
			inspects[k] = append(inspects[k], inspect(ctx, pipe, key, l.Algorithm == limits.SlidingLog || l.Algorithm == limits.Concurrency))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("step %d: inspect keys: %v", step, err)
	}
	elapsedMs := time.Since(start).Milliseconds() + 1
	resets := 0
	for _, k := range touched {
		q := seqs[k]
		where := fmt.Sprintf("step %d, key %s, %s, now %d", step, q.key, q.c.limit, now)
		ok, keys := true, []string{q.key}
		switch {
		case isWindow(q.c.limit.Algorithm):
			ok = checkWindows(t, where, inspects[k], q, now, win[k], elapsedMs)
			keys = []string{windowKey(q.key, win[k]), windowKey(q.key, win[k]-1)}
		case isBucket(q.c.limit.Algorithm):
			ok = checkBucket(t, where, inspects[k][0], q, now, elapsedMs)
		case q.c.limit.Algorithm == limits.Concurrency:
			ok = checkSlots(t, where, inspects[k][0], q, now, elapsedMs)
		default:
			ok = checkLog(t, where, inspects[k][0], q, now, elapsedMs)
		}
		if !ok {
			resets++
			q.restarted = true
			c.Del(ctx, keys...)
		}
	}
	return resets
}

// inspection is what inspect reads of a key: its PTTL, and its value (GET)
// or, for a sorted set, its members with their scores.
type inspection struct {
	pttl *redis.DurationCmd
	get  *redis.StringCmd
	set  *redis.ZSliceCmd
}

// inspect queues in pipe, a MULTI … EXEC, the reads of key and a PERSIST,
// so that a key with a millisecond left cannot expire between the reads
// and PERSIST.
func inspect(ctx context.Context, pipe redis.Pipeliner, key string, sortedSet bool) inspection {
	in := inspection{pttl: pipe.PTTL(ctx, key)}
	if sortedSet {
		in.set = pipe.ZRangeWithScores(ctx, key, 0, -1)
	} else {
		in.get = pipe.Get(ctx, key)
	}
	pipe.Persist(ctx, key)
	return in
}

// inspected reads an inspection: the PTTL in milliseconds (-2: no key, -1:
// none), and the value, or the sorted set's members and scores in turn.
func inspected(t *testing.T, in inspection) (pttl int64, vals []any) {
	t.Helper()
	d, err := in.pttl.Result()
	if err != nil {
		t.Fatalf("inspect: PTTL: %v", err)
	}
	pttl = int64(d / time.Millisecond)
	if d < 0 {
		pttl = int64(d) // -1 or -2, as Redis answers
	}
	switch {
	case in.set != nil:
		for _, z := range in.set.Val() {
			vals = append(vals, z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64))
		}
	case in.get.Err() == nil:
		vals = []any{in.get.Val()}
	case !errors.Is(in.get.Err(), redis.Nil):
		t.Fatalf("inspect: GET: %v", in.get.Err())
	}
	return pttl, vals
}

// checkLog compares a sliding log's members inside the window, as
// inspect read them (one member per unit, scored by its hit's instant),
// with the model's log, and requires a TTL, where there is one, no shorter
// than the log's life. Members that have left the window may linger until
// the key is next charged. It reports false, having reset the model, when
// Redis's own clock expired the key before the test could read it.
func checkLog(t *testing.T, where string, in inspection, q *sequence, now, elapsedMs int64) bool {
	t.Helper()
	return checkMembers(t, where, in, q, now, now-q.c.limit.PeriodMicros(), elapsedMs)
}

// checkMembers is checkLog for the members scored after cutoff: a sliding
// log's inside its window, a concurrency limit's live slots.
func checkMembers(t *testing.T, where string, in inspection, q *sequence, now, cutoff, elapsedMs int64) bool {
	t.Helper()
	pttl, flat := inspected(t, in)
	var want []limits.LogEntry
	stateMs := int64(0)
	if q.model.state.Live && now < q.model.expireAt {
		want = mergeLog(q.model.state.Log, cutoff)
		stateMs = max(2, (q.model.expireAt-now+999)/1000)
	}
	got := mergeLog(entries(t, flat), cutoff)
	switch {
	case len(got) == 0 && len(want) > 0 && pttl == -2 && stateMs <= elapsedMs:
		q.model = model{}
		return false
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s: the set holds %v inside the window, want the Go log %v", where, got, want)
	case len(want) > 0 && pttl >= 0 && pttl < stateMs-elapsedMs:
		t.Fatalf("%s: PTTL = %d ms, shorter than the log's %d ms", where, pttl, stateMs)
	}
	return true
}

// mergeLog is log's entries after cutoff, those of one instant merged, as
// the sorted set's unit members group them.
func mergeLog(log []limits.LogEntry, cutoff int64) []limits.LogEntry {
	var out []limits.LogEntry
	for _, e := range log {
		switch {
		case e.At <= cutoff:
		case len(out) > 0 && out[len(out)-1].At == e.At:
			out[len(out)-1].Cost += e.Cost
		default:
			out = append(out, e)
		}
	}
	return out
}

// checkBucket compares a bucket's state, as inspect read it, with the
// model: the same TAT while the model's state lives, and otherwise none or
// one that is past (equivalent to an absent key); a TTL, where this step set
// one, no shorter than the state's life. It reports false, having reset the
// model, when Redis's own clock expired the key before the test could read
// it.
func checkBucket(t *testing.T, where string, in inspection, q *sequence, now, elapsedMs int64) bool {
	t.Helper()
	pttl, vals := inspected(t, in)
	live := q.model.state.Live && now < q.model.expireAt
	stateMs := int64(0)
	if live {
		stateMs = max(2, (q.model.expireAt-now+999)/1000)
	}
	if len(vals) == 0 {
		if live {
			if pttl == -2 && stateMs <= elapsedMs {
				q.model = model{}
				return false
			}
			t.Fatalf("%s: no key, want TAT %d (Go state %+v)", where, q.model.state.TAT, q.model.state)
		}
		return true
	}
	raw, _ := vals[0].(string)
	tat, _, ok := decodeBucket([]byte(raw))
	switch {
	case !ok:
		t.Fatalf("%s: key holds %q, want a 16-byte bucket", where, raw)
	case live && tat <= now*1000 && stateMs <= elapsedMs:
		// Redis's own clock expired the key between a charge and its
		// undo, which left a past state, equivalent to none: follow Redis.
		q.model = model{}
		return false
	case live && tat != q.model.state.TAT:
		t.Fatalf("%s: TAT %d, want %d (Go state %+v)", where, tat, q.model.state.TAT, q.model.state)
	case !live && tat > now*1000:
		t.Fatalf("%s: TAT %d, %d ns ahead, want one past (the Go state is absent)", where, tat, tat-now*1000)
	case pttl >= 0 && pttl < stateMs-elapsedMs:
		t.Fatalf("%s: PTTL = %d ms, shorter than the state's %d ms", where, pttl, stateMs)
	}
	return true
}

// checkWindows compares a window sequence's counters, as inspect read
// them (window w's, then w−1's), with the model, and checks that a counter
// holds a TTL only if this step set it, to the end of the window it
// matters in. It reports false, having reset the sequence (model and
// Redis), when Redis's own clock expired a counter before the test could
// read it.
func checkWindows(t *testing.T, where string, in []inspection, q *sequence, now, w int64, elapsedMs int64) bool {
	t.Helper()
	l := q.c.limit
	f := limits.WindowFrame(l, now) // its W is w
	var wantCur, wantPrev int64
	if st := q.model.state; st.Live && now < q.model.expireAt {
		switch st.Window {
		case w:
			wantCur, wantPrev = st.Count, st.Prev
		case w - 1:
			wantPrev = st.Count
		}
	}
	if l.Algorithm == limits.FixedWindow {
		wantPrev = -1 // not read
	}
	for i, want := range []int64{wantCur, wantPrev} {
		if want < 0 {
			continue
		}
		pttl, vals := inspected(t, in[i])
		var got int64
		if len(vals) == 1 {
			s, _ := vals[0].(string)
			if len(s) != 8 {
				t.Fatalf("%s: counter of window w-%d holds %q, want 8 bytes", where, i, s)
			}
			got = int64(binary.BigEndian.Uint64([]byte(s)) >> 1)
		}
		// When the counter of w−i stops mattering: the end of its window,
		// or of the next one for a sliding window.
		end := []int64{f.End, f.Start}[i]
		if l.Algorithm == limits.SlidingWindow {
			end = []int64{f.Next, f.End}[i]
		}
		wantMs := max(2, (end-now+999)/1000)
		if got != want {
			if got == 0 && pttl == -2 && wantMs <= elapsedMs {
				q.model = model{}
				return false
			}
			t.Fatalf("%s: counter of window w-%d = %d, want %d (Go state %+v)", where, i, got, want, q.model.state)
		}
		if pttl >= 0 && (pttl > wantMs || pttl < wantMs-elapsedMs) {
			t.Fatalf("%s: counter of window w-%d: PTTL = %d ms, want %d ms (the end of the window it counts in, %d µs away; %d ms elapsed)", where, i, pttl, wantMs, end-now, elapsedMs)
		}
		if got != 0 && pttl == -2 {
			t.Fatalf("%s: counter of window w-%d: no key but a count", where, i)
		}
	}
	return true
}

// entries decodes a sliding log's sorted set, as member, score pairs in
// the order of their scores, into a log of one entry per member (a unit of
// cost).
func entries(t *testing.T, flat []any) []limits.LogEntry {
	t.Helper()
	var log []limits.LogEntry
	for i := 0; i+1 < len(flat); i += 2 {
		score, _ := flat[i+1].(string)
		at, err := strconv.ParseInt(score, 10, 64)
		if err != nil {
			t.Fatalf("sorted set entry %v %q: want an integer score", flat[i], score)
		}
		log = append(log, limits.LogEntry{At: at, Cost: 1})
	}
	return log
}

func format(r limits.Result) string {
	return fmt.Sprintf("allowed=%v remaining=%d retry=%d µs reset=%d µs delay=%d µs", r.Allowed, r.Remaining, r.RetryAfter.Microseconds(), r.ResetAfter.Microseconds(), r.Delay.Microseconds())
}

// maxNow bounds the test's instants (year 2065): with MaxPeriod, the sliding
// window's ExpireAt (w+2)·T is beyond 2^53 from 2070 on.
const maxNow = 3_000_000_000_000_000

// advance picks the time to the next step: often nothing or microseconds,
// often a fraction of the period, sometimes several periods.
func advance(rng *rand.Rand, l limits.Limit) int64 {
	t := l.PeriodMicros()
	switch p := rng.IntN(100); {
	case p < 15:
		return 0
	case p < 35:
		return 1 + rng.Int64N(1000)
	case p < 65:
		return 1 + rng.Int64N(max(1, t/l.Requests))
	case p < 90:
		return 1 + rng.Int64N(t)
	default:
		return t + rng.Int64N(2*t)
	}
}

// pickCost picks among a peek, small costs, refunds and costs that just fit
// or can never fit.
func pickCost(rng *rand.Rand, l limits.Limit) int64 {
	costs := []int64{0, 1, 1, 1, 1, 2, 5, l.Requests + 1, -1, -3, l.Capacity() + 1, l.MaxCost()}
	return costs[rng.IntN(len(costs))]
}

// TestSlidingLogLong fills sliding logs of 1000 entries, many of them at one
// instant, so that the walks of a refusal and of a refund read several pages
// and entries of one instant must stay in the order of Go's log; it compares
// every decision and the final entries with the Go algorithm.
func TestSlidingLogLong(t *testing.T) {
	var now int64 = 1_767_225_600_000_000
	s, c, _ := setup(t, Options{Clock: func() int64 { return now }})
	ctx := context.Background()
	for _, countRefused := range []bool{false, true} {
		l := limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Hour, CountRefused: countRefused}
		t.Run(l.String(), func(t *testing.T) {
			key := "long:" + l.String()
			var m model
			call := func(what string, costs ...int64) {
				t.Helper()
				hits := make([]limits.Hit, len(costs))
				models := make([]*model, len(costs))
				for i, cost := range costs {
					hits[i] = limits.Hit{Key: key, Limit: l, Cost: cost}
					models[i] = &m
				}
				res := make([]limits.Result, len(hits))
				// One hit per decideCall: the hits of one Decide call on
				// one key are decided in order.
				want := make([]limits.Decision, len(hits))
				for i := range hits {
					d := decideCall(models[i:i+1], hits[i:i+1], now)
					want[i] = d[0]
				}
				s.Decide(ctx, hits, res)
				for i := range hits {
					if res[i] != want[i].Result {
						t.Fatalf("%s, hit %d (cost %d): Redis got %s; Go want %s", what, i, costs[i], format(res[i]), format(want[i].Result))
					}
				}
			}
			ones := make([]int64, 100)
			for i := range ones {
				ones[i] = 1
			}
			for range 9 {
				call("fill", ones...)
				now += 3 * time.Minute.Microseconds()
			}
			call("fill", append(ones[:98:98], 2)...) // full: the last entry costs 2
			call("refused, the walk frees every entry", 1000)
			call("peek", 0)
			call("refund", -650, 0, 1)
			now += 20 * time.Minute.Microseconds()
			call("after some entries left the window", 5, 0, 800, -1)
			now += 50 * time.Minute.Microseconds()
			call("after most entries left the window", 0, 1, 3)
			zs, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			var flat []any
			for _, z := range zs {
				flat = append(flat, z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64))
			}
			cutoff := now - l.PeriodMicros()
			if got, want := mergeLog(entries(t, flat), cutoff), mergeLog(m.state.Log, cutoff); !reflect.DeepEqual(got, want) {
				t.Errorf("sorted set holds %v, want the Go log %v", got, want)
			}
		})
	}
}
