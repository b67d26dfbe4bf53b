package trace

import (
	"math"
	"slices"
	"testing"
	"time"
)

func config(shape string) Config {
	s, err := ParseShape(shape)
	if err != nil {
		panic(err)
	}
	return Config{Shape: s, Requests: 10, Period: time.Second, Sources: 20, Duration: 5 * time.Minute, Seed: 7}
}

// TestShapesRate checks each shape's mean rate against its load, within a
// wide margin: 20 sources × 300 s at 10/s is 60,000 requests at load 1.
func TestShapesRate(t *testing.T) {
	for _, name := range []string{"poisson:0.5", "poisson:0.9", "poisson:1.1", "poisson:2", "onoff:1", "edge:1", "edge:2"} {
		c := config(name)
		tr, err := c.Generate()
		if err != nil {
			t.Fatal(err)
		}
		got, want := float64(len(tr.Requests)), c.Expected()
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("%s: %.0f requests, want about %.0f", name, got, want)
		}
		if !slices.IsSortedFunc(tr.Requests, func(a, b Request) int { return int(a.At - b.At) }) {
			t.Errorf("%s: requests not sorted", name)
		}
		for _, r := range tr.Requests {
			if r.At < 0 || r.At >= c.Duration || r.At%time.Microsecond != 0 {
				t.Fatalf("%s: offset %s outside [0, %s) or not whole microseconds", name, r.At, c.Duration)
			}
		}
	}
}

// TestDeterministic checks that a seed fixes the trace and that another seed
// changes it.
func TestDeterministic(t *testing.T) {
	for _, name := range []string{"poisson:1", "onoff:1", "edge:1"} {
		c := config(name)
		a, _ := c.Generate()
		b, _ := c.Generate()
		if !slices.Equal(a.Requests, b.Requests) {
			t.Errorf("%s: two traces from one seed differ", name)
		}
		c.Seed++
		d, _ := c.Generate()
		if slices.Equal(a.Requests, d.Requests) {
			t.Errorf("%s: seeds %d and %d gave the same trace", name, c.Seed-1, c.Seed)
		}
	}
}

// TestEdgeBursts checks the adversary: every request within a hundredth of
// a period of a window edge (counted from the Unix epoch), and a trailing
// period across a burst holding twice the threshold.
func TestEdgeBursts(t *testing.T) {
	c := config("edge:1")
	c.Period = 7 * time.Second // not a divisor of a day: edges are not at Start
	at, err := c.Source(3)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Period.Microseconds()
	for _, a := range at {
		abs := Start.Add(a).UnixMicro()
		d := min(abs%p, p-abs%p)
		if d > p/100 {
			t.Fatalf("request at %s is %dµs from a window edge", a, d)
		}
	}
	most := 0
	for i := range at {
		j, _ := slices.BinarySearch(at, at[i]+c.Period)
		most = max(most, j-i)
	}
	if most != 2*int(c.Requests) {
		t.Errorf("busiest trailing period holds %d, want %d", most, 2*c.Requests)
	}
}

func TestParseShape(t *testing.T) {
	for text, want := range map[string]Shape{
		"poisson":     {Poisson, 1},
		"poisson:0.9": {Poisson, 0.9},
		"onoff:2":     {OnOff, 2},
		"edge:1.1":    {Edge, 1.1},
	} {
		got, err := ParseShape(text)
		if err != nil || got != want {
			t.Errorf("ParseShape(%q) = %v, %v; want %v", text, got, err, want)
		}
		if back, _ := ParseShape(got.String()); back != got {
			t.Errorf("%v does not read back: %v", got, back)
		}
	}
	for _, bad := range []string{"", "square", "poisson:", "poisson:0", "poisson:-1", "poisson:NaN", "edge:1e9", "Poisson"} {
		if _, err := ParseShape(bad); err == nil {
			t.Errorf("ParseShape(%q): no error", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	c := config("poisson")
	c.Sources = 0
	if _, err := c.Generate(); err == nil {
		t.Error("0 sources: no error")
	}
	c = config("poisson")
	c.Sources = 1 << 30
	if _, err := c.Generate(); err == nil {
		t.Error("a billion sources held in memory: no error")
	}
	c = config("poisson")
	if _, err := c.Source(c.Sources); err == nil {
		t.Error("source out of range: no error")
	}
}
