package share

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

func randomDemands(r *rand.Rand) (float64, []Demand) {
	limit := math.Round(r.Float64()*1000) + 1
	ds := make([]Demand, 1+r.Intn(12))
	for i := range ds {
		switch r.Intn(4) {
		case 0:
			ds[i] = Demand{} // unknown
		case 1:
			ds[i] = Demand{Rate: r.Float64() * limit / 10, Known: true}
		default:
			ds[i] = Demand{Rate: r.Float64() * limit, Known: true}
		}
	}
	return limit, ds
}

// The three properties of a max-min fair division, on random fleets.
func TestDivideProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for run := 0; run < 5000; run++ {
		limit, ds := randomDemands(r)
		got := Divide(limit, 0, ds)
		sum, wanted := 0.0, 0.0
		for i, s := range got {
			sum += s
			want := limit / float64(len(ds))
			if ds[i].Known {
				want = ds[i].Rate
			}
			wanted += want
			if want <= limit/float64(len(ds)) && s < want-1e-9 {
				t.Fatalf("run %d: client %d asked %v, under an equal share, got %v", run, i, want, s)
			}
			if s < 0 {
				t.Fatalf("run %d: negative share %v", run, s)
			}
		}
		if sum > limit*(1+1e-12) {
			t.Fatalf("run %d: shares sum to %v over the limit %v", run, sum, limit)
		}
		// Nothing is wasted: the whole limit is handed out.
		if math.Abs(sum-limit) > 1e-9*limit {
			t.Fatalf("run %d: shares sum to %v, not the whole limit %v", run, sum, limit)
		}
		// Max-min: no client gets less than min(its want, any other's share)
		// unless that other is below its own want too.
		for i := range got {
			for j := range got {
				wi := want(ds, i, limit)
				if got[i] < wi-1e-9 && got[j] > got[i]+1e-9 {
					t.Fatalf("run %d: client %d unsatisfied at %v while %d gets %v", run, i, got[i], j, got[j])
				}
			}
		}
	}
}

func want(ds []Demand, i int, limit float64) float64 {
	if !ds[i].Known {
		return limit / float64(len(ds))
	}
	return math.Max(ds[i].Rate, 0)
}

// With a floor, every client gets at least its part of it, the shares
// still sum to the limit, and the division is the one without a floor over
// the demands raised to that part.
func TestDivideFloor(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for run := 0; run < 5000; run++ {
		limit, ds := randomDemands(r)
		floor := []float64{0.05, 0.1, 0.2}[r.Intn(3)]
		least := floor * limit / float64(len(ds))
		got := Divide(limit, floor, ds)
		raised := make([]Demand, len(ds))
		sum := 0.0
		for i, d := range ds {
			if d.Known && d.Rate < least {
				d.Rate = least
			}
			raised[i] = d
			sum += got[i]
			if got[i] < least*(1-1e-12) {
				t.Fatalf("run %d: client %d got %v, under the floor's part %v", run, i, got[i], least)
			}
		}
		if math.Abs(sum-limit) > 1e-9*limit {
			t.Fatalf("run %d: shares sum to %v, not the limit %v", run, sum, limit)
		}
		for i, w := range Divide(limit, 0, raised) {
			if math.Abs(w-got[i]) > 1e-9*limit {
				t.Fatalf("run %d: client %d got %v, %v without the floor over raised demands", run, i, got[i], w)
			}
		}
	}
	// An idle client beside one at the limit: the idle one holds a bucket,
	// the busy one keeps all but the idle one's part.
	got := Divide(100, 0.1, []Demand{{Rate: 0, Known: true}, {Rate: 100, Known: true}})
	if got[0] != 5 || got[1] != 95 {
		t.Fatalf("idle beside busy: got %v, want [5 95]", got)
	}
	if b, ok := DefaultShape.Tokens(got[0]); !ok || b.MaxTokens < 1 {
		t.Fatalf("the idle client's %v a second: bucket %+v, %v", got[0], b, ok)
	}
}

func TestDivideUnusedGoesToOthers(t *testing.T) {
	got := Divide(100, 0, []Demand{{Rate: 10, Known: true}, {Rate: 500, Known: true}, {Rate: 500, Known: true}})
	if got[0] != 10 || got[1] != 45 || got[2] != 45 {
		t.Fatalf("got %v, want [10 45 45]", got)
	}
	got = Divide(100, 0, []Demand{{Rate: 10, Known: true}, {Rate: 20, Known: true}})
	if got[0] != 45 || got[1] != 55 {
		t.Fatalf("surplus: got %v, want [45 55]", got)
	}
	got = Divide(90, 0, []Demand{{}, {}, {Rate: 1000, Known: true}})
	if got[0] != 30 || got[1] != 30 || got[2] != 30 {
		t.Fatalf("unknown demands: got %v, want equal shares", got)
	}
	if got := Divide(0, 0, []Demand{{}}); got[0] != 0 {
		t.Fatalf("zero limit: got %v", got)
	}
	if got := Divide(10, 0, []Demand{{Rate: math.NaN(), Known: true}, {Rate: -3, Known: true}}); got[0] != 5 || got[1] != 5 {
		t.Fatalf("bad rates: got %v", got)
	}
}

func TestMeasure(t *testing.T) {
	if d := Measure(7, 3, 0); d.Known {
		t.Fatalf("time_elapsed 0: got %+v, want unknown", d)
	}
	if d := Measure(7, 3, 5*time.Second); !d.Known || d.Rate != 2 {
		t.Fatalf("got %+v, want 2/s", d)
	}
	// Counts that would wrap past 2^64−1 saturate: the largest demand,
	// never zero.
	if d := Measure(math.MaxUint64, 1, time.Second); d.Rate != math.MaxUint64 {
		t.Fatalf("2^64−1 allowed and 1 denied: got %+v, want %v/s", d, float64(math.MaxUint64))
	}
	if d := Measure(math.MaxUint64, math.MaxUint64, time.Second); d.Rate != math.MaxUint64 {
		t.Fatalf("2^64−1 allowed and denied: got %+v, want %v/s", d, float64(math.MaxUint64))
	}
}

func TestSteady(t *testing.T) {
	cases := []struct{ prev, next, want float64 }{
		{100, 104, 100}, {100, 96, 100}, {100, 106, 106}, {100, 90, 90}, {0, 5, 5},
	}
	for _, c := range cases {
		if got := Steady(c.prev, c.next, 0.05); got != c.want {
			t.Errorf("Steady(%v, %v) = %v, want %v", c.prev, c.next, got, c.want)
		}
	}
}

func TestTokens(t *testing.T) {
	cases := []struct {
		rate float64
		want Bucket
	}{
		{100, Bucket{MaxTokens: 100, TokensPerFill: 100, FillInterval: time.Second}},
		{1.5, Bucket{MaxTokens: 1, TokensPerFill: 3, FillInterval: 2 * time.Second}},
		{100.0 / 3, Bucket{MaxTokens: 33, TokensPerFill: 100, FillInterval: 3 * time.Second}},
		{0.1, Bucket{MaxTokens: 1, TokensPerFill: 1, FillInterval: 10 * time.Second}},
		{1.0 / 60, Bucket{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Minute}},
	}
	for _, c := range cases {
		got, ok := DefaultShape.Tokens(c.rate)
		if !ok || got != c.want {
			t.Errorf("Tokens(%v) = %+v, want %+v", c.rate, got, c.want)
		}
	}
	if _, ok := DefaultShape.Tokens(0); ok {
		t.Fatal("a zero rate got a bucket")
	}
}

// A bucket never enforces more than the rate it was made from (above one
// token per MaxFill), its fill interval is whole seconds, and a full bucket
// holds no more than Burst of the rate (or one token), whatever the fill.
func TestTokensProperties(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for run := 0; run < 5000; run++ {
		rate := math.Exp(r.Float64()*16 - 8) // about 3e-4 to 3e3 per second
		b, ok := DefaultShape.Tokens(rate)
		if !ok {
			t.Fatalf("rate %v: no bucket", rate)
		}
		f := b.FillInterval
		if f < time.Second || f%time.Second != 0 {
			t.Fatalf("rate %v: fill interval %v is not whole seconds", rate, f)
		}
		enforced := float64(b.TokensPerFill) / f.Seconds()
		if enforced > rate*(1+1e-9) && f < DefaultShape.MaxFill {
			t.Fatalf("rate %v: bucket %+v enforces %v, more than the rate", rate, b, enforced)
		}
		if rate >= 1 && enforced < rate*0.5 {
			t.Fatalf("rate %v: bucket %+v enforces only %v", rate, b, enforced)
		}
		burst := DefaultShape.Burst.Seconds() * rate
		if float64(b.MaxTokens) > math.Max(burst, 1)+1e-9 {
			t.Fatalf("rate %v: bucket %+v holds more than %v", rate, b, burst)
		}
	}
}

func TestTTL(t *testing.T) {
	if got := TTL(0, 5*time.Second); got != 11*time.Second {
		t.Errorf("TTL(0, 5s) = %v, want 11s", got)
	}
	if got := TTL(30500*time.Millisecond, 5*time.Second); got != 31*time.Second {
		t.Errorf("TTL(30.5s, 5s) = %v, want 31s", got)
	}
	if got := TTL(0, 300*time.Millisecond); got != 2*time.Second {
		t.Errorf("TTL(0, 300ms) = %v, want 2s", got)
	}
}
