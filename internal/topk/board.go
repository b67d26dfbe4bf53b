package topk

import (
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// Board defaults: per rule, 4 slices of 20 s (the counts cover the last
// 60 to 80 s), 64 keys each; at most 256 rules at once.
const (
	DefaultCapacity = 64
	DefaultSlices   = 4
	DefaultSlice    = 20 * time.Second
	DefaultMaxRules = 256
)

// BoardOptions configure a Board; the zero value is the defaults.
type BoardOptions struct {
	Capacity, Slices int
	Slice            time.Duration
	// MaxRules bounds the rules counted at once; refusals of a rule beyond
	// it, while the others are not idle, are counted in Untracked alone.
	MaxRules int
	// HashValues shows each value as `#` and its hash, as a store key holds
	// it under -hash-values, so that /top shows no caller's value.
	HashValues bool
}

// Board counts, per rule, the descriptors refused, each in a Window: what
// GET /top answers. It is safe for concurrent use; the rules' windows lock
// apart.
type Board struct {
	o         BoardOptions
	mu        sync.RWMutex
	rules     map[ruleID]*ruleWindow
	untracked atomic.Uint64
}

type ruleID struct{ domain, rule string }

type ruleWindow struct {
	mu sync.Mutex
	w  *Window
}

// NewBoard returns an empty Board.
func NewBoard(o BoardOptions) *Board {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Slices <= 0 {
		o.Slices = DefaultSlices
	}
	if o.Slice <= 0 {
		o.Slice = DefaultSlice
	}
	if o.MaxRules <= 0 {
		o.MaxRules = DefaultMaxRules
	}
	return &Board{o: o, rules: map[ruleID]*ruleWindow{}}
}

// Add counts one refusal at now of the descriptor entries by rule of
// domain. Once the rule has been seen it allocates nothing: its window's
// sketches are reused, and a descriptor's label is written only when it
// takes a counter.
func (b *Board) Add(now time.Time, domain, rule string, entries []descriptors.Entry) {
	id := ruleID{domain, rule}
	b.mu.RLock()
	rw := b.rules[id]
	b.mu.RUnlock()
	if rw == nil {
		if rw = b.addRule(id, now); rw == nil {
			b.untracked.Add(1)
			return
		}
	}
	key := entriesHash(entries)
	rw.mu.Lock()
	if l := rw.w.Add(now, key); l != nil {
		writeLabel(l, entries, b.o.HashValues)
	}
	rw.mu.Unlock()
}

// addRule makes room for rule id, dropping rules idle at now if the board
// is full; nil if none is idle.
func (b *Board) addRule(id ruleID, now time.Time) *ruleWindow {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rw := b.rules[id]; rw != nil {
		return rw
	}
	if len(b.rules) >= b.o.MaxRules {
		b.dropIdle(now)
		if len(b.rules) >= b.o.MaxRules {
			return nil
		}
	}
	rw := &ruleWindow{w: NewWindow(b.o.Capacity, b.o.Slices, b.o.Slice)}
	b.rules[id] = rw
	return rw
}

// dropIdle forgets the rules that counted nothing in the span covered at
// now. b.mu is held.
func (b *Board) dropIdle(now time.Time) {
	for id, rw := range b.rules {
		rw.mu.Lock()
		idle := rw.w.Idle(now)
		rw.mu.Unlock()
		if idle {
			delete(b.rules, id)
		}
	}
}

// RuleTop is one rule's part of a Report.
type RuleTop struct {
	Domain string `json:"domain"`
	Rule   string `json:"rule"`
	// Refused is the refusals the rule counted over the span.
	Refused uint64 `json:"refused"`
	// ErrorBound is the most a descriptor's count exceeds its true count
	// by, and the most one left out of Top was refused.
	ErrorBound uint64 `json:"error_bound"`
	Top        []Key  `json:"top"`
}

// Key is one descriptor of a RuleTop: refused at most Count times, at
// least Count − Error.
type Key struct {
	Descriptor string `json:"descriptor"`
	Count      uint64 `json:"count"`
	Error      uint64 `json:"error"`
}

// Report is what a Board counted, as GET /top answers it.
type Report struct {
	// SpanSeconds is how far back the counts reach at the most; they
	// cover more than SpanSeconds less one slice.
	SpanSeconds  float64 `json:"span_seconds"`
	SliceSeconds float64 `json:"slice_seconds"`
	// Capacity is the descriptors each slice of a rule holds.
	Capacity int `json:"capacity"`
	// HashedValues tells that values are shown as their hash.
	HashedValues bool `json:"hashed_values"`
	// Untracked counts refusals of rules the board had no room for, since
	// the start.
	Untracked uint64    `json:"untracked"`
	Rules     []RuleTop `json:"rules"`
}

// Report returns, for each rule that refused in the span covered at now,
// its n descriptors refused most; the rules that refused most first.
func (b *Board) Report(now time.Time, n int) Report {
	r := Report{
		SpanSeconds: (time.Duration(b.o.Slices) * b.o.Slice).Seconds(), SliceSeconds: b.o.Slice.Seconds(),
		Capacity: b.o.Capacity, HashedValues: b.o.HashValues, Untracked: b.untracked.Load(), Rules: []RuleTop{},
	}
	b.mu.RLock()
	for id, rw := range b.rules {
		rw.mu.Lock()
		s := rw.w.Summarize(now, n)
		rw.mu.Unlock()
		if s.Total == 0 {
			continue
		}
		rt := RuleTop{Domain: id.domain, Rule: id.rule, Refused: s.Total, ErrorBound: s.Bound, Top: make([]Key, len(s.Top))}
		for i, c := range s.Top {
			rt.Top[i] = Key{Descriptor: c.Label, Count: c.Count, Error: c.Err}
		}
		r.Rules = append(r.Rules, rt)
	}
	b.mu.RUnlock()
	slices.SortFunc(r.Rules, func(a, c RuleTop) int {
		if a.Refused != c.Refused {
			if a.Refused > c.Refused {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Domain+"\x00"+a.Rule, c.Domain+"\x00"+c.Rule)
	})
	return r
}

// entriesHash is the FNV-1a hash of the length-prefixed keys and values:
// a descriptor's identity in the sketches.
func entriesHash(entries []descriptors.Entry) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	add := func(s string) {
		n := len(s)
		for range 4 {
			h = (h ^ uint64(n&0xff)) * prime
			n >>= 8
		}
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	for _, e := range entries {
		add(e.Key)
		add(e.Value)
	}
	return h
}

// writeLabel writes entries as key=value pairs joined by commas; a value
// longer than descriptors.MaxValueLen, and every value with hashValues, is
// `#` and its hash as a store key holds it.
func writeLabel(l *Label, entries []descriptors.Entry, hashValues bool) {
	for i, e := range entries {
		if i > 0 {
			l.Append(",")
		}
		l.Append(e.Key)
		l.Append("=")
		if hashValues || len(e.Value) > descriptors.MaxValueLen {
			sum := descriptors.ValueHash(e.Value)
			var hx [2 * len(sum)]byte
			hex.Encode(hx[:], sum[:])
			l.Append("#")
			l.AppendBytes(hx[:])
			continue
		}
		l.Append(e.Value)
	}
}

// Describe is what a board shows of entries (for a log line): key=value
// pairs joined by commas, values hashed as with BoardOptions.HashValues
// when hashValues is set, cut at LabelMax bytes.
func Describe(entries []descriptors.Entry, hashValues bool) string {
	var l Label
	writeLabel(&l, entries, hashValues)
	return l.String()
}
