package topk

import (
	"slices"
	"time"
)

// Window counts keys over a recent span of time: a ring of n sketches, one
// per slice of time (slices start at multiples of the slice length since
// the epoch), the oldest emptied and reused when a new slice begins. Its
// counts at an instant cover the slice it falls in and the n−1 before it:
// more than (n−1) slices, at most n. It is not safe for concurrent use.
type Window struct {
	k      int
	slice  int64 // ns
	ring   []*Sketch
	starts []int64 // the slice index each sketch counts; -1 for none
}

// NewWindow returns a Window of n slices of the given length, each a
// Sketch of capacity k. A slice's sketch is allocated when it is first
// used and reused after.
func NewWindow(k, n int, slice time.Duration) *Window {
	n = max(n, 1)
	w := &Window{k: k, slice: max(int64(slice), 1), ring: make([]*Sketch, n), starts: make([]int64, n)}
	for i := range w.starts {
		w.starts[i] = -1
	}
	return w
}

// Span is how far back the counts at an instant reach at the most: n
// slices.
func (w *Window) Span() time.Duration { return time.Duration(w.slice * int64(len(w.ring))) }

// Add counts one more of key id at now, as Sketch.Add does.
func (w *Window) Add(now time.Time, id uint64) *Label {
	idx := now.UnixNano() / w.slice
	p := int(idx % int64(len(w.ring)))
	s := w.ring[p]
	if s == nil {
		s = New(w.k)
		w.ring[p] = s
	}
	if w.starts[p] != idx {
		s.Reset()
		w.starts[p] = idx
	}
	return s.Add(id)
}

// live reports whether ring position p counts a slice that the window at
// now covers.
func (w *Window) live(p int, now time.Time) bool {
	idx := now.UnixNano() / w.slice
	st := w.starts[p]
	return w.ring[p] != nil && st >= 0 && st <= idx && st > idx-int64(len(w.ring))
}

// Idle reports whether nothing was counted in the span covered at now.
func (w *Window) Idle(now time.Time) bool {
	for p := range w.ring {
		if w.live(p, now) && w.ring[p].Total() > 0 {
			return false
		}
	}
	return true
}

// Summary is what a Window counted over its span.
type Summary struct {
	// Total is the number of keys counted.
	Total uint64
	// Bound is the most a key that Top leaves out can have been counted,
	// and the most any count of Top exceeds the truth by: the sum of the
	// slices' Min, at most Total/k.
	Bound uint64
	// Top holds the keys counted most, the most first: each Count an
	// upper bound, Count − Err a lower bound.
	Top []Count
}

// Summarize merges the slices covered at now and returns the n keys
// counted most. A key's count is the sum of its counts in the slices that
// hold it plus, for each slice that does not, that slice's Min (what it
// may have been seen there unheld); its error likewise sums its errors
// and those Mins.
func (w *Window) Summarize(now time.Time, n int) Summary {
	var sum Summary
	var live []*Sketch
	for p := range w.ring {
		if w.live(p, now) {
			live = append(live, w.ring[p])
		}
	}
	merged := map[uint64]*Count{}
	for _, s := range live {
		sum.Total += s.Total()
		sum.Bound += s.Min()
		for _, c := range s.Counts() {
			m := merged[c.ID]
			if m == nil {
				m = &Count{ID: c.ID, Label: c.Label}
				merged[c.ID] = m
			}
			m.Count += c.Count
			m.Err += c.Err
		}
	}
	for _, s := range live {
		for id, m := range merged {
			if _, held := s.find(id); !held {
				m.Count += s.Min()
				m.Err += s.Min()
			}
		}
	}
	for _, m := range merged {
		sum.Top = append(sum.Top, *m)
	}
	slices.SortFunc(sum.Top, byCount)
	if len(sum.Top) > n {
		sum.Top = sum.Top[:n]
	}
	return sum
}
