// Package topk finds the keys seen most often in a stream in fixed memory:
// the space-saving summary (Metwally, Agrawal and El Abbadi), one per slice
// of time, a ring of slices per rule, and a board of rules that the
// service's refusals feed and GET /top reads.
//
// A Sketch of capacity k holds k counters. A key it holds counts up; a key
// it does not hold takes the counter with the smallest count, c, and
// starts at c+1 with an error of c. So, over a stream of n keys:
//
//   - every count is an upper bound of the key's true count, by at most
//     its error, and every error is at most n/k;
//   - a key not held was seen at most Min times (Min is 0 until the sketch
//     is full, and never more than n/k);
//   - every key seen more than n/k times is held.
//
// Nothing is allocated after New: the counters, a min-heap of them by
// count and an open-addressing table from key to counter are arrays of
// size k, and a counter's label (what /top shows of the key) is a fixed
// buffer. Keys are 64-bit hashes the caller computes; two keys with one
// hash count as one.
//
// Time is passed in (Window, Board); nothing here reads a clock.
package topk

import (
	"math/bits"
	"slices"
)

// LabelMax bounds the bytes a counter's label keeps; a longer one is cut
// and ends in "…".
const LabelMax = 128

// Label is the text a counter shows for its key, in a fixed buffer.
type Label struct {
	b [LabelMax]byte
	n uint8
	// cut is set when the label did not fit.
	cut bool
}

// Reset empties l.
func (l *Label) Reset() { l.n, l.cut = 0, false }

// Append adds s to l, up to LabelMax bytes in all.
func (l *Label) Append(s string) {
	room := LabelMax - int(l.n)
	if len(s) > room {
		s, l.cut = s[:room], true
	}
	l.n += uint8(copy(l.b[l.n:], s))
}

// AppendBytes adds b to l, up to LabelMax bytes in all.
func (l *Label) AppendBytes(b []byte) {
	room := LabelMax - int(l.n)
	if len(b) > room {
		b, l.cut = b[:room], true
	}
	l.n += uint8(copy(l.b[l.n:], b))
}

// String is the label, with "…" at its end if it was cut.
func (l *Label) String() string {
	if l.cut {
		return string(l.b[:l.n]) + "…"
	}
	return string(l.b[:l.n])
}

// Sketch is a space-saving summary of capacity k. It is not safe for
// concurrent use: Board locks around it.
type Sketch struct {
	ids    []uint64
	counts []uint64
	errs   []uint64
	labels []Label
	heap   []int32 // counters by count, smallest first
	at     []int32 // a counter's position in heap
	table  []int32 // counter+1 by hash of its id; 0 is empty
	shift  uint    // 64 − log2(len(table))
	used   int
	total  uint64
}

// New returns an empty Sketch of capacity k (at least 1).
func New(k int) *Sketch {
	k = max(k, 1)
	size := 1 << bits.Len(uint(2*k-1)) // a power of two, at least 2k
	s := &Sketch{
		ids: make([]uint64, k), counts: make([]uint64, k), errs: make([]uint64, k),
		labels: make([]Label, k), heap: make([]int32, 0, k), at: make([]int32, k),
		table: make([]int32, size), shift: uint(64 - bits.TrailingZeros(uint(size))),
	}
	return s
}

// Reset empties s, keeping its memory.
func (s *Sketch) Reset() {
	clear(s.table)
	s.heap = s.heap[:0]
	s.used, s.total = 0, 0
}

// Capacity is k, the number of keys s holds at most.
func (s *Sketch) Capacity() int { return len(s.ids) }

// Total is the number of keys added since New or Reset.
func (s *Sketch) Total() uint64 { return s.total }

// Min is the most a key that s does not hold can have been seen: 0 until s
// is full, then the smallest count held (at most Total/k).
func (s *Sketch) Min() uint64 {
	if s.used < len(s.ids) {
		return 0
	}
	return s.counts[s.heap[0]]
}

// Add counts one more of key id. It returns the counter's label when id
// took a counter it did not hold (the caller writes it, before any other
// call on s), and nil when s held id already.
func (s *Sketch) Add(id uint64) *Label {
	s.total++
	if c, ok := s.find(id); ok {
		s.counts[c]++
		s.down(int(s.at[c]))
		return nil
	}
	var c int32
	if s.used < len(s.ids) {
		c = int32(s.used)
		s.used++
		s.counts[c], s.errs[c] = 0, 0
		s.at[c] = int32(len(s.heap))
		s.heap = append(s.heap, c)
		s.up(len(s.heap) - 1)
	} else {
		c = s.heap[0]
		s.remove(s.ids[c])
		s.errs[c] = s.counts[c]
	}
	s.ids[c] = id
	s.counts[c]++
	s.insert(id, c)
	s.down(int(s.at[c]))
	l := &s.labels[c]
	l.Reset()
	return l
}

// Count is one key's counter: Count is an upper bound of how often it was
// seen, Count − Err a lower bound.
type Count struct {
	ID         uint64
	Count, Err uint64
	Label      string
}

// Counts returns the keys held, the most counted first (ties by ID).
func (s *Sketch) Counts() []Count {
	out := make([]Count, 0, s.used)
	for c := range s.used {
		out = append(out, Count{ID: s.ids[c], Count: s.counts[c], Err: s.errs[c], Label: s.labels[c].String()})
	}
	slices.SortFunc(out, byCount)
	return out
}

func byCount(a, b Count) int {
	switch {
	case a.Count != b.Count:
		if a.Count > b.Count {
			return -1
		}
		return 1
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// home is id's first slot in the table. Keys are hashes already; the
// multiplication spreads ones that differ in their high bits only.
func (s *Sketch) home(id uint64) int {
	return int((id * 0x9e3779b97f4a7c15) >> s.shift)
}

func (s *Sketch) find(id uint64) (int32, bool) {
	mask := len(s.table) - 1
	for i := s.home(id); ; i = (i + 1) & mask {
		e := s.table[i]
		if e == 0 {
			return 0, false
		}
		if s.ids[e-1] == id {
			return e - 1, true
		}
	}
}

func (s *Sketch) insert(id uint64, c int32) {
	mask := len(s.table) - 1
	i := s.home(id)
	for s.table[i] != 0 {
		i = (i + 1) & mask
	}
	s.table[i] = c + 1
}

// remove takes id out of the table, shifting back the entries after it
// that would no longer be found (linear probing without tombstones).
func (s *Sketch) remove(id uint64) {
	mask := len(s.table) - 1
	i := s.home(id)
	for s.ids[s.table[i]-1] != id {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.table[j] != 0; j = (j + 1) & mask {
		h := s.home(s.ids[s.table[j]-1])
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		s.table[i] = s.table[j]
		i = j
	}
	s.table[i] = 0
}

func (s *Sketch) less(a, b int) bool { return s.counts[s.heap[a]] < s.counts[s.heap[b]] }

func (s *Sketch) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.at[s.heap[a]], s.at[s.heap[b]] = int32(a), int32(b)
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		m := i
		if l := 2*i + 1; l < n && s.less(l, m) {
			m = l
		}
		if r := 2*i + 2; r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		s.swap(i, m)
		i = m
	}
}
