// Package hist is a log-linear latency histogram in the manner of HDR
// Histogram: values below 2^SubBits are counted exactly, and every power of
// two above is split into 2^SubBits equal buckets, so that a percentile is
// reported within 1/2^SubBits (0.8%) of the true value, with a fixed 58 KB
// of counters and no allocation per record.
package hist

import (
	"math"
	"math/bits"
)

const (
	// SubBits is the precision: 2^SubBits buckets per power of two.
	SubBits  = 7
	subCount = 1 << SubBits
	// buckets covers every non-negative int64.
	buckets = subCount + (63-SubBits)*subCount
)

// Histogram counts int64 values (nanoseconds, for rls-bench). The zero value
// is empty and ready. It is not safe for concurrent use: give each goroutine
// its own and Merge them.
type Histogram struct {
	counts [buckets]uint64
	total  uint64
	min    int64
	max    int64
	sum    float64
}

// index is the bucket of v ≥ 0.
func index(v int64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - SubBits - 1 // v>>e is in [subCount, 2*subCount)
	return subCount + e*subCount + int(v>>e) - subCount
}

// highest is the largest value that falls in bucket i.
func highest(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	e := (i - subCount) / subCount
	m := int64(i-subCount-e*subCount) + subCount
	lo := m << e
	return lo + (int64(1) << e) - 1
}

// Record counts v; a negative v counts as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[index(v)]++
	h.total++
	h.sum += float64(v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Min and Max are the extreme values recorded (exact); 0 when empty.
func (h *Histogram) Min() int64 { return h.min }

// Max is the largest value recorded.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact mean; 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Percentile returns the value below or at which q percent (0 < q ≤ 100) of
// the values fall: the highest value of the bucket holding that rank, capped
// at Max, so it is never below the true percentile and at most 0.8% above.
// 0 when empty.
func (h *Histogram) Percentile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q / 100 * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(highest(i), h.max)
		}
	}
	return h.max
}
