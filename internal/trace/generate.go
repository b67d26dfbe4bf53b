package trace

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Start is the instant a shape's offsets count from: midnight UTC, so that
// every period that divides a day has a window edge at offset zero.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxInMemory bounds the requests Generate holds: a larger trace is replayed
// one source at a time with Config.Source.
const MaxInMemory = 50_000_000

// Config is a seeded shape over a number of sources. Its zero value is not
// valid: Validate says which field is missing.
type Config struct {
	Shape Shape
	// Requests per Period is the threshold that the shape's load is
	// measured against (the limit under test).
	Requests int64
	Period   time.Duration
	// Sources is how many independent sources send, each at the shape's
	// rate.
	Sources int
	// Duration is the length of the trace: offsets lie in [0, Duration).
	Duration time.Duration
	// Seed picks the random draws: the same Config gives the same trace.
	Seed uint64
}

// Validate reports the first field that makes c unusable.
func (c Config) Validate() error {
	switch {
	case c.Requests <= 0:
		return fmt.Errorf("trace: threshold requests %d: want at least 1", c.Requests)
	case c.Period < time.Microsecond:
		return fmt.Errorf("trace: threshold period %s: want at least 1µs", c.Period)
	case c.Sources <= 0:
		return fmt.Errorf("trace: %d sources: want at least 1", c.Sources)
	case c.Duration < time.Microsecond:
		return fmt.Errorf("trace: duration %s: want at least 1µs", c.Duration)
	case !(c.Shape.Load > 0 && c.Shape.Load <= maxLoad):
		return fmt.Errorf("trace: load %g: want a number in (0, %d]", c.Shape.Load, maxLoad)
	case c.Shape.Kind < Poisson || c.Shape.Kind > Edge:
		return fmt.Errorf("trace: unknown shape %s", c.Shape.Kind)
	}
	return nil
}

// Expected is the mean number of requests of the whole trace.
func (c Config) Expected() float64 {
	return c.Shape.Load * float64(c.Requests) * c.Duration.Seconds() / c.Period.Seconds() * float64(c.Sources)
}

// Source returns the arrivals of source i (0 ≤ i < Sources) as offsets from
// Start, sorted, each a whole number of microseconds (the resolution of the
// limits' decisions). It depends only on c and i, so sources can be drawn
// in any order or in parallel.
func (c Config) Source(i int) ([]time.Duration, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if i < 0 || i >= c.Sources {
		return nil, fmt.Errorf("trace: source %d of %d", i, c.Sources)
	}
	r := rand.New(rand.NewPCG(c.Seed, uint64(i)))
	// Nanoseconds between requests at the shape's mean rate.
	gap := float64(c.Period) / (c.Shape.Load * float64(c.Requests))
	switch c.Shape.Kind {
	case OnOff:
		return onOff(r, gap, c.Period, c.Duration), nil
	case Edge:
		return edge(r, c), nil
	}
	return poisson(r, gap, 0, c.Duration, nil), nil
}

// poisson appends to out the arrivals in [from, to) of a Poisson process
// whose mean gap is gap nanoseconds.
func poisson(r *rand.Rand, gap float64, from, to time.Duration, out []time.Duration) []time.Duration {
	for t := float64(from) + r.ExpFloat64()*gap; t < float64(to); t += r.ExpFloat64() * gap {
		out = append(out, time.Duration(t).Truncate(time.Microsecond))
	}
	return out
}

// onOff alternates bursts at half the mean gap and silences, each phase an
// exponential time of mean period; the first phase is a burst or a silence
// at even odds.
func onOff(r *rand.Rand, gap float64, period, d time.Duration) []time.Duration {
	var out []time.Duration
	on := r.IntN(2) == 0
	for t := time.Duration(0); t < d; on = !on {
		end := min(t+time.Duration(r.ExpFloat64()*float64(period))+1, d)
		if on {
			out = poisson(r, gap/2, t, end, out)
		}
		t = end
	}
	return out
}

// edge bursts at every other window edge of the threshold's period (edges
// count from the Unix epoch, as fixed windows do): Load × Requests
// requests, rounded, in the hundredth of a period before the edge and as
// many in the hundredth after it, at uniform random instants.
func edge(r *rand.Rand, c Config) []time.Duration {
	p := c.Period.Microseconds()
	width := max(1, p/100)
	half := max(1, int64(c.Shape.Load*float64(c.Requests)+0.5))
	end := c.Duration.Microseconds()
	// The first edge at or after Start, then the first one with room
	// before it for a burst.
	e := (p - Start.UnixMicro()%p) % p
	for e < width {
		e += p
	}
	var out []time.Duration
	burst := make([]int64, 0, 2*half)
	for ; e-width < end; e += 2 * p {
		burst = burst[:0]
		for range half {
			burst = append(burst, e-1-r.Int64N(width), e+r.Int64N(width))
		}
		slices.Sort(burst)
		for _, us := range burst {
			if us < end {
				out = append(out, time.Duration(us)*time.Microsecond)
			}
		}
	}
	return out
}

// ErrTooLarge is Generate's refusal of a trace larger than MaxInMemory.
var ErrTooLarge = errors.New("trace: too many requests to hold in memory")

// Generate draws every source and merges them into one trace ordered by
// offset (ties by source). Its sources are the descriptors source=0,
// source=1, ….
func (c Config) Generate() (Trace, error) {
	if err := c.Validate(); err != nil {
		return Trace{}, err
	}
	if c.Expected() > MaxInMemory {
		return Trace{}, fmt.Errorf("%w: about %.0f, at most %d", ErrTooLarge, c.Expected(), MaxInMemory)
	}
	t := Trace{Start: Start, Sources: make([]Descriptor, c.Sources)}
	for i := range c.Sources {
		t.Sources[i] = Descriptor{{Key: SourceKey, Value: fmt.Sprint(i)}}
		at, err := c.Source(i)
		if err != nil {
			return Trace{}, err
		}
		for _, a := range at {
			t.Requests = append(t.Requests, Request{At: a, Source: i})
		}
	}
	slices.SortStableFunc(t.Requests, func(a, b Request) int {
		return cmp.Compare(a.At, b.At)
	})
	return t, nil
}
