package limits

import (
	"time"
)

// A limit's kind is its algorithm (Algorithm, an entry of algorithms) and
// the modifiers it has: a modifier changes what a limit of some algorithms
// does, and is set by fields of its own in a limits file (block_for makes
// a lockout, lockout.go; calendar and time_zone make a calendar limit,
// calendar.go). Each modifier is one entry of Modifiers, which says all
// that the packages around a limit need of it: the fields it owns and how
// they build it, the algorithm it defaults to, what config warns of, what
// explain and check-config say of it, what RLQS does with it. The config
// loader, explain, check-config, lint and RLQS read the table rather than
// name a modifier (explain's block_for and locked_until, which predate
// it, are the explained limit's own fields).
//
// What a decision needs of a modifier (its pure algorithm, its part of a
// store key) is called directly from DecideWithin, WindowFrame and
// AppendPeriod, so that a modifier adds no indirect call to the hot path;
// an algorithm's decision is its entry's, called by index where a switch
// jumped. The stores keep a modifier's state as they keep their
// algorithms' (the Redis store's form of each is its own), and the
// conformance suite (package storetest) has a file of cases per kind.

// algorithmKind is one entry of algorithms: an algorithm's name in a
// limits file, its tag in store keys, its pure decision (Decide's, on
// its own state) and, for a state kept unchanged beside a lock, the
// instant that state stops mattering (nil: it is kept beside none).
type algorithmKind struct {
	name, short string
	decide      func(l Limit, s State, cost, now, maxDelay int64) Decision
	expiry      func(l Limit, s State, now int64) int64
}

// algorithms is the table of algorithms, by Algorithm. DecideWithin
// calls an entry's decide by index, as a switch would jump.
var algorithms = [...]algorithmKind{
	SlidingWindow: {"sliding_window", "sw", slidingWindow, windowExpiry},
	FixedWindow:   {"fixed_window", "fw", fixedWindow, windowExpiry},
	TokenBucket:   {"token_bucket", "tb", tokenBucket, bucketExpiry},
	SlidingLog:    {"sliding_log", "sl", slidingLog, logExpiry},
	LeakyBucket:   {"leaky_bucket", "lb", leakyBucket, bucketExpiry},
	Concurrency:   {"concurrency", "cc", concurrency, nil},
}

// windowExpiry is a window's state's: its frame's (WindowFrame). A
// sliding window's state of the previous window is its count until the
// current one ends.
func windowExpiry(l Limit, s State, now int64) int64 {
	f := WindowFrame(l, now)
	sliding := l.Algorithm == SlidingWindow
	switch {
	case s.Window == f.W && sliding && s.Count > 0:
		return f.Next
	case s.Window == f.W, s.Window == f.W-1 && sliding:
		return f.End
	}
	return 0
}

// bucketExpiry is a bucket's state's: the instant it is full (token) or
// empty (leaky) again.
func bucketExpiry(_ Limit, s State, _ int64) int64 { return ceilDiv(s.TAT, 1000) }

// logExpiry is a sliding log's state's: its newest entry's leaving.
func logExpiry(l Limit, s State, _ int64) int64 {
	if len(s.Log) > 0 {
		return s.Log[len(s.Log)-1].At + l.PeriodMicros()
	}
	return 0
}

// Modifier is one entry of Modifiers.
type Modifier struct {
	// Name names the modifier in docs and logs.
	Name string
	// Fields are the limits file's fields the modifier owns, in the order
	// a rule's errors check them.
	Fields []Field
	// On reports whether l has the modifier.
	On func(l Limit) bool
	// Build sets the modifier on l from the fields of its rule, once l is
	// built from the others. Its error is a *FieldError naming the field
	// at fault, which the config loader points at.
	Build func(l *Limit, r RuleFields) error
	// Algorithm is the algorithm of a rule that names none and gives the
	// modifier's fields r, when the modifier has one of its own (ok).
	Algorithm func(r RuleFields) (a Algorithm, ok bool)
	// Counts reports whether the modifier changes how a limit counts, not
	// only how it answers: two limits of a rate_limits list must differ
	// in what counts (Limit.Counting).
	Counts bool
	// clear removes the modifier from l.
	clear func(l *Limit)
	// Warning says why l, which loads and is served, is most likely not
	// what its author meant; "" when it is.
	Warning func(l Limit) string
	// Describe is the line check-config prints of l at now (µs), so that
	// a field written wrong shows before it counts; "" for none.
	Describe func(l Limit, now int64) string
	// Explain sets in e what an explanation says of l at now (µs), and
	// Text is e's line in a text explanation ("" for none).
	Explain func(l Limit, now int64, e *ModifiersExplained)
	Text    func(e ModifiersExplained) string
	// RLQS says what a quota stream's bucket gets of a limit with the
	// modifier, where RLQS cannot hold it exactly: logged once per limit
	// at info, with the modifier's first field (Value). "" when RLQS
	// holds it.
	RLQS  string
	Value func(l Limit) any
}

// Field is a field of a limits file that a modifier owns.
type Field struct {
	// Name is the field as a limits file spells it.
	Name string
	// Type is how its value is read.
	Type FieldType
	// Noun names the field in "unlimited with NOUN".
	Noun string
	// Without says, for an algorithm that takes no such field, why: the
	// error of a rule of that algorithm that gives it.
	Without map[Algorithm]string
}

// FieldType is how a limits file's value of a Field is read.
type FieldType uint8

// The types of a Field's value.
const (
	Bool FieldType = iota
	String
	// Duration is a Go duration string, such as 15m, and positive.
	Duration
)

// FieldValue is the value a rule gives a Field, in the member its Type
// says.
type FieldValue struct {
	Bool     bool
	String   string
	Duration time.Duration
}

// RuleFields is what a modifier reads of its rule: the unit as the
// limits file names it ("month") and its multiplier, whether the rule
// names its algorithm, and the modifiers' fields it gives.
type RuleFields struct {
	Unit           string
	UnitMultiplier int64
	AlgorithmSet   bool
	// Given returns the value of the Field named name, and whether the
	// rule gives it.
	Given func(name string) (FieldValue, bool)
}

// value is the value of field name, zero when the rule does not give it.
func (r RuleFields) value(name string) FieldValue {
	v, _ := r.Given(name)
	return v
}

// ModifiersExplained is what the modifiers of a limit say of it in an
// explanation. rls.ExplainedLimit embeds it, so that its fields are the
// explained limit's own in JSON.
type ModifiersExplained struct {
	// Calendar is a calendar limit's window at the instant explained
	// (calendar_kind.go).
	Calendar *ExplainedCalendar `json:"calendar,omitempty"`
	// SyncInterval is a hot-key limit's sync_interval (Go duration, sync.go),
	// empty when it has none.
	SyncInterval string `json:"sync_interval,omitempty"`
}

// Modifiers is the table of modifiers, in the order a rule's errors check
// their fields.
var Modifiers = []Modifier{lockoutModifier, calendarModifier, syncModifier}

// DefaultAlgorithm is the algorithm of a rule that names none and gives
// the modifiers' fields r, when one of them has its own.
func DefaultAlgorithm(r RuleFields) (Algorithm, bool) {
	for _, m := range Modifiers {
		if m.Algorithm == nil {
			continue
		}
		if a, ok := m.Algorithm(r); ok {
			return a, true
		}
	}
	return 0, false
}

// Counting is l as it counts: without count_refused and the modifiers
// that change only its answers. The limits of a rate_limits list must
// differ in it, since a second limit that counts the same way would change
// nothing.
func (l Limit) Counting() Limit {
	l.CountRefused = false
	for _, m := range Modifiers {
		if !m.Counts {
			m.clear(&l)
		}
	}
	return l
}

// Warnings are the modifiers' warnings of l (Modifier.Warning).
func Warnings(l Limit) []string {
	return modifierLines(func(m Modifier) string {
		if m.Warning == nil {
			return ""
		}
		return m.Warning(l)
	})
}

// modifierLines are the lines line gives of each modifier, but "".
func modifierLines(line func(Modifier) string) []string {
	var lines []string
	for _, m := range Modifiers {
		if s := line(m); s != "" {
			lines = append(lines, s)
		}
	}
	return lines
}

// Explain is what the modifiers of l say of it at now (µs).
func Explain(l Limit, now int64) ModifiersExplained {
	var e ModifiersExplained
	for _, m := range Modifiers {
		if m.Explain != nil && m.On(l) {
			m.Explain(l, now, &e)
		}
	}
	return e
}

// Lines are e's lines in a text explanation, one per modifier that has
// one.
func (e ModifiersExplained) Lines() []string {
	return modifierLines(func(m Modifier) string {
		if m.Text == nil {
			return ""
		}
		return m.Text(e)
	})
}
