// Package trace makes the request traces that the accuracy report and
// `envoy-rls simulate` replay: seeded shapes (Poisson at a multiple of a
// threshold, on/off bursts, an adversary who bursts at window edges) and
// recorded traffic read from CSV.
//
// A shape is deterministic: the same Config gives the same arrivals, on any
// machine, because every source draws from its own PCG generator seeded with
// the Config's seed and the source's index. That also lets a caller replay a
// trace of hundreds of millions of requests one source at a time
// (Config.Source) without holding it in memory.
package trace

import (
	"strings"
	"time"
)

// SourceKey is the descriptor key of a shape's sources: source i is the
// descriptor source=i.
const SourceKey = "source"

// Entry is one key=value pair of a descriptor.
type Entry struct {
	Key, Value string
}

// Descriptor is the entries that name a source, in order.
type Descriptor []Entry

// String renders d as a CSV line's descriptor field: k=v;k2=v2.
func (d Descriptor) String() string {
	var b strings.Builder
	for i, e := range d {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(e.Key)
		b.WriteByte('=')
		b.WriteString(e.Value)
	}
	return b.String()
}

// Request is one hit of a trace.
type Request struct {
	// At is the hit's offset from the trace's Start.
	At time.Duration
	// Source is the index of the hit's source in Trace.Sources.
	Source int
}

// Trace is a whole trace in memory, its requests in the order of At (ties
// keep their order of arrival).
type Trace struct {
	// Start is the instant that the requests' offsets count from: a
	// shape's Start, or a CSV file's first timestamp.
	Start    time.Time
	Sources  []Descriptor
	Requests []Request
}

// End is the offset of the trace's last request (zero for none).
func (t Trace) End() time.Duration {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].At
}
