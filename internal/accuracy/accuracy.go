// Package accuracy measures how far each rate limiting algorithm strays
// from an exact limit: it replays seeded traces (package trace) through an
// algorithm, on the pure Go functions of package limits or on a store, and
// scores every source's answers against an exact sliding log (score.go),
// giving the four figures Cloudflare published for its sliding window. The
// report (`rls-bench accuracy`, docs/accuracy.md) is built from its Report.
package accuracy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Algorithms are the algorithms a report covers, in its order.
var Algorithms = []limits.Algorithm{limits.FixedWindow, limits.SlidingWindow, limits.SlidingLog, limits.TokenBucket, limits.LeakyBucket}

// Shapes are the traces a report replays: Poisson below, near and above
// the threshold, on/off bursts, and the adversary at window edges.
var Shapes = []trace.Shape{
	{Kind: trace.Poisson, Load: 0.5}, {Kind: trace.Poisson, Load: 0.9},
	{Kind: trace.Poisson, Load: 1.1}, {Kind: trace.Poisson, Load: 2},
	{Kind: trace.OnOff, Load: 1}, {Kind: trace.Edge, Load: 1},
}

// Config is one run. Its zero value is not valid: see Validate.
type Config struct {
	Seed     uint64
	Sources  int
	Duration time.Duration
	// Requests per Period is every limit's threshold; the buckets' burst
	// (a token bucket's capacity, a leaky bucket's queue) is Requests too.
	Requests int64
	Period   time.Duration
	// Shapes and Algorithms default to the package's lists.
	Shapes     []trace.Shape
	Algorithms []limits.Algorithm
	// Decider defaults to Pure.
	Decider Decider
	// KeyPrefix starts every source's key (a store's state): a run on a
	// shared Redis gives one of its own, so that no earlier run's state is
	// found.
	KeyPrefix string
	// Workers decide sources in parallel; zero means GOMAXPROCS. The
	// figures do not depend on it.
	Workers int
}

// Limit is the limit of algorithm a that c measures.
func (c Config) Limit(a limits.Algorithm) limits.Limit {
	l := limits.Limit{Algorithm: a, Requests: c.Requests, Period: c.Period}
	if a == limits.LeakyBucket {
		l.Burst = c.Requests
	}
	return l
}

func (c Config) withDefaults() Config {
	if c.Shapes == nil {
		c.Shapes = Shapes
	}
	if c.Algorithms == nil {
		c.Algorithms = Algorithms
	}
	if c.Decider == nil {
		c.Decider = Pure{}
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	return c
}

// Validate reports the first field that makes c unusable.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, a := range c.Algorithms {
		if err := c.Limit(a).Validate(); err != nil {
			return fmt.Errorf("accuracy: %s: %w", a, err)
		}
	}
	for _, s := range c.Shapes {
		if err := c.trace(s).Validate(); err != nil {
			return err
		}
	}
	if len(c.Shapes) == 0 || len(c.Algorithms) == 0 {
		return errors.New("accuracy: no shapes or no algorithms")
	}
	return nil
}

func (c Config) trace(s trace.Shape) trace.Config {
	return trace.Config{Shape: s, Requests: c.Requests, Period: c.Period, Sources: c.Sources, Duration: c.Duration, Seed: c.Seed}
}

// Report is a run's figures, Figures[shape][algorithm] in the order of
// Config's lists, and the timeline its edge chart draws.
type Report struct {
	Config  Config
	Figures [][]Figures
	// Timeline is the first source of the first Edge shape, if the run has
	// one: its arrivals and, per algorithm, its admitted instants, as
	// offsets from trace.Start in microseconds.
	Timeline *Timeline
}

// Timeline is one source's requests and what each algorithm admitted.
type Timeline struct {
	Shape    trace.Shape
	Arrivals []int64
	Admitted [][]int64
}

// Run replays every shape through every algorithm.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	r := &Report{Config: c, Figures: make([][]Figures, len(c.Shapes))}
	for i, s := range c.Shapes {
		f, err := c.runShape(ctx, s)
		if err != nil {
			return nil, err
		}
		r.Figures[i] = f
		if s.Kind == trace.Edge && r.Timeline == nil {
			if r.Timeline, err = c.timeline(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// chunk is how many sources a worker takes at once. The figures are summed
// per chunk and the chunks in order, so that the floating-point sums, and
// the report, do not depend on the number of workers.
const chunk = 64

func (c Config) runShape(ctx context.Context, s trace.Shape) ([]Figures, error) {
	chunks := (c.Sources + chunk - 1) / chunk
	parts := make([][]Figures, chunks)
	errs := make([]error, chunks)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.Workers, chunks) {
		wg.Go(func() {
			w := worker{c: c, shape: s}
			for k := range next {
				parts[k], errs[k] = w.chunk(ctx, k)
			}
		})
	}
	for k := range chunks {
		next <- k
	}
	close(next)
	wg.Wait()
	out := make([]Figures, len(c.Algorithms))
	for k := range chunks {
		if errs[k] != nil {
			return nil, errs[k]
		}
		for a := range out {
			out[a].add(parts[k][a])
		}
	}
	return out, nil
}

// worker holds one goroutine's scratch space.
type worker struct {
	c     Config
	shape trace.Shape
	at    []int64
	out   []Outcome
	queue []int64
}

// chunk decides and scores sources [k·chunk, (k+1)·chunk).
func (w *worker) chunk(ctx context.Context, k int) ([]Figures, error) {
	figs := make([]Figures, len(w.c.Algorithms))
	for src := k * chunk; src < min((k+1)*chunk, w.c.Sources); src++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := w.arrivals(src); err != nil {
			return nil, err
		}
		for a, alg := range w.c.Algorithms {
			l := w.c.Limit(alg)
			if err := w.c.Decider.DecideSource(ctx, l, w.c.key(w.shape, alg, src), w.at, w.out); err != nil {
				return nil, err
			}
			var f Figures
			f, w.queue = score(l.Requests, l.PeriodMicros(), w.at, w.out, w.queue)
			periods(&f, l.Requests, l.PeriodMicros(), w.at, w.out)
			figs[a].add(f)
		}
	}
	return figs, nil
}

// arrivals draws source src's instants into w.at, in microseconds since
// the epoch, and sizes w.out to match.
func (w *worker) arrivals(src int) error {
	ds, err := w.c.trace(w.shape).Source(src)
	if err != nil {
		return err
	}
	start := trace.Start.UnixMicro()
	w.at = w.at[:0]
	for _, d := range ds {
		w.at = append(w.at, start+d.Microseconds())
	}
	w.out = append(w.out[:0], make([]Outcome, len(w.at))...)
	return nil
}

func (c Config) key(s trace.Shape, a limits.Algorithm, src int) string {
	return fmt.Sprintf("%s{%s:%s:%d}", c.KeyPrefix, s, a, src)
}

// timeline replays source 0 of s again, keeping what each algorithm
// admitted and when.
func (c Config) timeline(ctx context.Context, s trace.Shape) (*Timeline, error) {
	w := worker{c: c, shape: s}
	if err := w.arrivals(0); err != nil {
		return nil, err
	}
	start := trace.Start.UnixMicro()
	t := &Timeline{Shape: s}
	for _, at := range w.at {
		t.Arrivals = append(t.Arrivals, at-start)
	}
	for _, alg := range c.Algorithms {
		// A key of its own: the first pass left state under the other.
		if err := c.Decider.DecideSource(ctx, c.Limit(alg), c.key(s, alg, 0)+":timeline", w.at, w.out); err != nil {
			return nil, err
		}
		var adm []int64
		for i, o := range w.out {
			if o.Allowed {
				adm = append(adm, w.at[i]+o.Delay-start)
			}
		}
		t.Admitted = append(t.Admitted, adm)
	}
	return t, nil
}

// Small is the run the test suite makes and the report's default: 100
// sources for 10 minutes at 100 requests a minute.
func Small(seed uint64) Config {
	return Config{Seed: seed, Sources: 100, Duration: 10 * time.Minute, Requests: 100, Period: time.Minute}
}
