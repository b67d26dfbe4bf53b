package topk

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// zipf is a skewed stream of n keys drawn from m, the commonest first, as
// the refusals of a few abusive clients among many are.
func zipf(seed uint64, n int, m uint64) []uint64 {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed^0x5eed)), 1.1, 1, m-1)
	out := make([]uint64, n)
	for i := range out {
		out[i] = z.Uint64()*0x9e3779b97f4a7c15 + 1 // spread, never one hash
	}
	return out
}

// TestSketchKeepsHeavyHitters is the space-saving guarantee, checked on
// skewed streams: every key seen more than n/k times is held, every count
// held is an upper bound of the true count by at most its error, every
// error and Min are at most n/k, and the true top 5 come first,
// in order (their counts are far apart at this skew), and the table finds every key
// it holds after all the replacements.
func TestSketchKeepsHeavyHitters(t *testing.T) {
	const k, n = 64, 200_000
	for seed := range uint64(5) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			stream := zipf(seed, n, 50_000)
			truth := map[uint64]uint64{}
			s := New(k)
			for _, id := range stream {
				truth[id]++
				s.Add(id)
			}
			bound := uint64(n / k)
			if s.Total() != n || s.Min() > bound {
				t.Fatalf("total %d min %d, want %d and at most %d", s.Total(), s.Min(), n, bound)
			}
			held := map[uint64]Count{}
			for _, c := range s.Counts() {
				held[c.ID] = c
				if _, ok := s.find(c.ID); !ok {
					t.Errorf("key %x is counted but its table entry is lost", c.ID)
				}
				tc := truth[c.ID]
				if c.Count < tc || c.Count-c.Err > tc || c.Err > bound {
					t.Errorf("key %x: count %d error %d, true count %d (bound %d)", c.ID, c.Count, c.Err, tc, bound)
				}
			}
			if len(held) != k {
				t.Fatalf("got %d keys held, want %d", len(held), k)
			}
			for id, tc := range truth {
				if _, ok := held[id]; tc > bound && !ok {
					t.Errorf("key %x seen %d times (> n/k = %d) is not held", id, tc, bound)
				}
			}
			got := s.Counts()
			for i, id := range trueTop(truth, 5) {
				if got[i].ID != id {
					t.Errorf("top %d: got key %x (count %d), want %x (true count %d)", i, got[i].ID, got[i].Count, id, truth[id])
				}
			}
		})
	}
}

func trueTop(truth map[uint64]uint64, n int) []uint64 {
	var ids []uint64
	for id := range truth {
		ids = append(ids, id)
	}
	cs := make([]Count, len(ids))
	for i, id := range ids {
		cs[i] = Count{ID: id, Count: truth[id]}
	}
	slices.SortFunc(cs, byCount)
	out := make([]uint64, n)
	for i := range out {
		out[i] = cs[i].ID
	}
	return out
}

// TestSketchExactWhileRoom: until it is full, a sketch counts exactly.
func TestSketchExactWhileRoom(t *testing.T) {
	s := New(4)
	for i, id := range []uint64{7, 7, 9, 7, 3, 9} {
		l := s.Add(id)
		if first := i == 0 || i == 2 || i == 4; (l != nil) != first {
			t.Fatalf("add %d (key %d): label returned %v, want %v", i, id, l != nil, first)
		}
		if l != nil {
			l.Append("k" + strconv.FormatUint(id, 10))
		}
	}
	want := []Count{{ID: 7, Count: 3, Label: "k7"}, {ID: 9, Count: 2, Label: "k9"}, {ID: 3, Count: 1, Label: "k3"}}
	got := s.Counts()
	if len(got) != len(want) || s.Min() != 0 {
		t.Fatalf("got %v (min %d), want %v (min 0)", got, s.Min(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counter %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestSketchAddAllocatesNothing: the memory is fixed at New, whatever keys
// come, labels included.
func TestSketchAddAllocatesNothing(t *testing.T) {
	s := New(64)
	stream := zipf(1, 10_000, 100_000)
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		if l := s.Add(stream[i%len(stream)]); l != nil {
			l.Append("remote_address=10.0.0.1")
		}
		i++
	})
	if allocs != 0 {
		t.Fatalf("got %v allocations per Add, want 0", allocs)
	}
}

func TestLabelCut(t *testing.T) {
	var l Label
	long := make([]byte, LabelMax+10)
	for i := range long {
		long[i] = 'a'
	}
	l.Append("x=")
	l.AppendBytes(long)
	got := l.String()
	if len(got) != LabelMax+len("…") || got[len(got)-len("…"):] != "…" {
		t.Fatalf("got a label of %d bytes %q, want %d bytes ending in …", len(got), got, LabelMax+len("…"))
	}
}

func BenchmarkSketchAdd(b *testing.B) {
	s := New(DefaultCapacity)
	stream := zipf(1, 1<<16, 100_000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if l := s.Add(stream[i&(1<<16-1)]); l != nil {
			l.Append("remote_address=10.0.0.1")
		}
	}
}
