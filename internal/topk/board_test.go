package topk

import (
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

var t0 = time.Unix(1_700_000_000, 0) // a multiple of 20 s

func ip(v string) []descriptors.Entry {
	return []descriptors.Entry{{Key: "remote_address", Value: v}}
}

// TestWindowSpan: the counts cover the slice of now and the n−1 before it,
// and a slice that falls out is emptied when its place is reused.
func TestWindowSpan(t *testing.T) {
	w := NewWindow(8, 3, 10*time.Second)
	for i := range 3 {
		w.Add(t0.Add(time.Duration(i)*10*time.Second), uint64(i+1))
	}
	if got := w.Summarize(t0.Add(25*time.Second), 10); got.Total != 3 || len(got.Top) != 3 {
		t.Fatalf("at 25 s: got %+v, want the 3 keys of slices 0, 1 and 2", got)
	}
	if got := w.Summarize(t0.Add(30*time.Second), 10); got.Total != 2 {
		t.Fatalf("at 30 s: got %+v, want slice 0 out of the span", got)
	}
	w.Add(t0.Add(31*time.Second), 9) // reuses slice 0's sketch
	got := w.Summarize(t0.Add(31*time.Second), 10)
	if got.Total != 3 {
		t.Fatalf("at 31 s: got %+v, want keys 2, 3 and 9", got)
	}
	for _, c := range got.Top {
		if c.ID == 1 {
			t.Fatalf("at 31 s: key 1 of slice 0 is still counted: %+v", got)
		}
	}
	if !w.Idle(t0.Add(time.Minute)) || w.Idle(t0.Add(31*time.Second)) {
		t.Fatal("a window is idle when no slice of its span counted anything, and only then")
	}
}

// TestWindowMergeBounds: merged across slices, every count stays an upper
// bound and count − error a lower bound of the true count, and the error
// bound holds for every key, on a skewed stream spread over the slices.
func TestWindowMergeBounds(t *testing.T) {
	const k, n = 32, 60_000
	w := NewWindow(k, 4, 20*time.Second)
	stream := zipf(7, n, 20_000)
	truth := map[uint64]uint64{}
	step := 80 * time.Second / n
	now := t0
	for _, id := range stream {
		truth[id]++
		w.Add(now, id)
		now = now.Add(step)
	}
	now = now.Add(-step)
	sum := w.Summarize(now, k)
	if sum.Total != n {
		t.Fatalf("got a total of %d, want %d", sum.Total, n)
	}
	if sum.Bound > n/k {
		t.Errorf("bound %d over n/k = %d", sum.Bound, n/k)
	}
	for _, c := range sum.Top {
		tc := truth[c.ID]
		if c.Count < tc || c.Count-c.Err > tc || c.Err > sum.Bound {
			t.Errorf("key %x: count %d error %d, true count %d, bound %d", c.ID, c.Count, c.Err, tc, sum.Bound)
		}
	}
	top := trueTop(truth, 3)
	for i, id := range top {
		if sum.Top[i].ID != id {
			t.Errorf("top %d: got %x, want %x", i, sum.Top[i].ID, id)
		}
	}
}

func TestBoardReport(t *testing.T) {
	b := NewBoard(BoardOptions{})
	for range 5 {
		b.Add(t0, "edge", "per_ip", ip("10.0.0.1"))
	}
	b.Add(t0, "edge", "per_ip", ip("10.0.0.2"))
	b.Add(t0, "edge", "login", []descriptors.Entry{{Key: "path", Value: "/login"}, {Key: "user", Value: "ann"}})
	r := b.Report(t0.Add(time.Second), 10)
	if r.SpanSeconds != 80 || r.SliceSeconds != 20 || r.Capacity != DefaultCapacity || len(r.Rules) != 2 {
		t.Fatalf("got %+v", r)
	}
	first := r.Rules[0]
	if first.Domain != "edge" || first.Rule != "per_ip" || first.Refused != 6 || first.ErrorBound != 0 {
		t.Fatalf("rule 0: got %+v, want per_ip with 6 refusals, exact", first)
	}
	want := []Key{{Descriptor: "remote_address=10.0.0.1", Count: 5}, {Descriptor: "remote_address=10.0.0.2", Count: 1}}
	for i := range want {
		if first.Top[i] != want[i] {
			t.Errorf("per_ip top %d: got %+v, want %+v", i, first.Top[i], want[i])
		}
	}
	if got := r.Rules[1].Top[0].Descriptor; got != "path=/login,user=ann" {
		t.Errorf("login: got %q", got)
	}
	if got := b.Report(t0.Add(2*time.Minute), 10); len(got.Rules) != 0 {
		t.Errorf("two minutes on: got %+v, want no rules", got.Rules)
	}
}

// TestBoardHashesValues: with HashValues the label holds each value's
// hash as a store key does, never the value.
func TestBoardHashesValues(t *testing.T) {
	b := NewBoard(BoardOptions{HashValues: true})
	b.Add(t0, "edge", "per_ip", ip("10.0.0.1"))
	got := b.Report(t0, 10).Rules[0].Top[0].Descriptor
	sum := descriptors.ValueHash("10.0.0.1")
	if want := "remote_address=#" + hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if strings.Contains(got, "10.0.0.1") || !b.Report(t0, 1).HashedValues {
		t.Fatal("the value is shown")
	}
}

// TestBoardMaxRules: past MaxRules, a new rule's refusals are counted as
// untracked until a rule goes idle and makes room.
func TestBoardMaxRules(t *testing.T) {
	b := NewBoard(BoardOptions{MaxRules: 1})
	b.Add(t0, "edge", "a", ip("1"))
	b.Add(t0, "edge", "b", ip("1"))
	if r := b.Report(t0, 10); len(r.Rules) != 1 || r.Untracked != 1 {
		t.Fatalf("got %+v, want rule a and one untracked", r)
	}
	later := t0.Add(2 * time.Minute)
	b.Add(later, "edge", "b", ip("1"))
	if r := b.Report(later, 10); len(r.Rules) != 1 || r.Rules[0].Rule != "b" {
		t.Fatalf("got %+v, want rule b in idle a's place", r)
	}
}

// TestBoardAddAllocatesNothing: once a rule is counted, a refusal costs no
// allocation, a new descriptor's label included.
func TestBoardAddAllocatesNothing(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		b := NewBoard(BoardOptions{HashValues: hashed})
		b.Add(t0, "edge", "per_ip", ip("x"))
		values := make([][]descriptors.Entry, 1000)
		for i := range values {
			values[i] = ip(strings.Repeat("v", i%50) + string(rune('a'+i%26)))
		}
		i := 0
		allocs := testing.AllocsPerRun(5000, func() {
			b.Add(t0, "edge", "per_ip", values[i%len(values)])
			i++
		})
		if allocs != 0 {
			t.Errorf("hash values %v: got %v allocations per Add, want 0", hashed, allocs)
		}
	}
}

func BenchmarkBoardAdd(b *testing.B) {
	board := NewBoard(BoardOptions{})
	values := make([][]descriptors.Entry, 1<<12)
	for i, id := range zipf(3, len(values), 100_000) {
		values[i] = ip(hex.EncodeToString([]byte{byte(id), byte(id >> 8), byte(id >> 16)}))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		board.Add(t0, "edge", "per_ip", values[i&(len(values)-1)])
	}
}

// TestBoardConcurrent: refusals of many goroutines on a few rules, with
// reports read meanwhile, add up (run with -race).
func TestBoardConcurrent(t *testing.T) {
	b := NewBoard(BoardOptions{})
	const goroutines, adds = 8, 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			b.Report(t0, 5)
		}
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range adds {
				b.Add(t0, "edge", string(rune('a'+g%3)), ip(strconv.Itoa(i%100)))
			}
		})
	}
	wg.Wait()
	<-done
	var total uint64
	for _, r := range b.Report(t0, 5).Rules {
		total += r.Refused
	}
	if total != goroutines*adds {
		t.Fatalf("got %d refusals, want %d", total, goroutines*adds)
	}
}
