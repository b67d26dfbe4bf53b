package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is a shape's way of spreading requests over time.
type Kind int

const (
	// Poisson sends requests at independent exponential intervals whose
	// mean rate is Load times the threshold's.
	Poisson Kind = iota
	// OnOff alternates bursts and silences, each lasting an exponential
	// time whose mean is the threshold's period; a burst is Poisson at
	// twice the mean rate, so that the rate over a long run is Load times
	// the threshold's.
	OnOff
	// Edge is an adversary who knows where fixed windows start: every
	// other window edge, it sends Load × N requests just before the edge
	// and as many just after it, then nothing until the next burst. Its
	// mean rate is Load times the threshold's, but a trailing period that
	// spans a burst holds twice that many requests.
	Edge
)

var kindNames = [...]string{Poisson: "poisson", OnOff: "onoff", Edge: "edge"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Shape is a Kind at a load: the mean rate as a multiple of the threshold.
type Shape struct {
	Kind Kind
	// Load is the mean rate over the threshold's rate: 0.5 is half of it.
	Load float64
}

// String renders s as ParseShape reads it: poisson:0.9.
func (s Shape) String() string {
	return s.Kind.String() + ":" + strconv.FormatFloat(s.Load, 'g', -1, 64)
}

// maxLoad bounds a shape's load so that a typo (poisson:1e9) fails instead
// of generating a trace that fills memory.
const maxLoad = 1000

// ParseShape reads a shape as KIND:LOAD (poisson:0.9, onoff:1.1, edge:2), or
// a bare KIND at load 1.
func ParseShape(text string) (Shape, error) {
	name, load, hasLoad := strings.Cut(text, ":")
	s := Shape{Load: 1}
	found := false
	for k, n := range kindNames {
		if n == name {
			s.Kind, found = Kind(k), true
		}
	}
	if !found {
		return Shape{}, fmt.Errorf("unknown trace shape %q: want poisson, onoff or edge, optionally :LOAD (poisson:0.9)", name)
	}
	if hasLoad {
		v, err := strconv.ParseFloat(load, 64)
		if err != nil || !(v > 0 && v <= maxLoad) {
			return Shape{}, fmt.Errorf("trace shape %q: load %q is not a number in (0, %d]", text, load, maxLoad)
		}
		s.Load = v
	}
	return s, nil
}
