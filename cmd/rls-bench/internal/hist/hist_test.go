package hist

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketsRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 123456, 1 << 40, 1<<62 + 12345, 1<<63 - 1} {
		i := index(v)
		if i < 0 || i >= buckets {
			t.Fatalf("index(%d) = %d, out of range", v, i)
		}
		hi := highest(i)
		if hi < v {
			t.Errorf("highest(index(%d)) = %d < value", v, hi)
		}
		if v >= subCount && float64(hi-v) > float64(v)/subCount {
			t.Errorf("bucket of %d ends at %d: more than 1/%d above", v, hi, subCount)
		}
		if i > 0 && highest(i-1) >= v {
			t.Errorf("previous bucket of %d ends at %d", v, highest(i-1))
		}
	}
}

func TestPercentilesExactBelowSubCount(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{50, 50}, {90, 90}, {99, 99}, {99.9, 100}, {100, 100}, {1, 1}} {
		if got := h.Percentile(c.q); got != c.want {
			t.Errorf("p%v = %d, want %d", c.q, got, c.want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50.5 {
		t.Errorf("count %d min %d max %d mean %v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

func TestPercentilesWithinPrecision(t *testing.T) {
	// 1..1,000,000 µs in ns, shuffled, split over two histograms and merged.
	const n = 1_000_000
	vals := make([]int64, n)
	for i := range vals {
		vals[i] = int64(i+1) * 1000
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	var a, b Histogram
	for i, v := range vals {
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	slices.Sort(vals)
	for _, q := range []float64{50, 90, 99, 99.9, 99.99} {
		exact := vals[int(q/100*n)-1]
		got := a.Percentile(q)
		if got < exact || float64(got-exact) > float64(exact)/subCount {
			t.Errorf("p%v = %d, exact %d: outside [exact, exact+1/%d]", q, got, exact, subCount)
		}
	}
	if a.Percentile(100) != n*1000 || a.Min() != 1000 {
		t.Errorf("p100 %d min %d", a.Percentile(100), a.Min())
	}
}

func TestSkewed(t *testing.T) {
	// 990 fast values and 10 slow ones: p99 is fast, p99.9 slow.
	var h Histogram
	for range 990 {
		h.Record(50_000)
	}
	for range 10 {
		h.Record(10_000_000)
	}
	if p := h.Percentile(99); p < 50_000 || p > 50_400 {
		t.Errorf("p99 = %d, want ≈50µs", p)
	}
	if p := h.Percentile(99.9); p != 10_000_000 {
		t.Errorf("p99.9 = %d, want 10ms", p)
	}
}

func TestEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram not zero")
	}
	h.Record(-5)
	if h.Percentile(50) != 0 || h.Count() != 1 {
		t.Fatal("negative value not recorded as 0")
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(int64(i) * 997)
	}
}
