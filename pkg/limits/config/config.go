package config

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Config is an immutable snapshot of every loaded limits file. It is safe to
// share between goroutines; a reload builds a new one.
type Config struct {
	// Domains maps a domain name to its tree, one domain per file.
	Domains map[string]*Domain
	// NotLoaded are the entries of a directory Load read that it did not
	// load (NotLoaded): none for a file, or from xDS.
	NotLoaded []string
}

// Domain is the descriptor tree of one domain.
type Domain struct {
	Name string
	// File is the path the domain was loaded from.
	File string
	// Descriptors are the top-level descriptors in file order.
	Descriptors []*Descriptor
	// Holds is the domain's holds field, nil when it has none (holds.go).
	Holds *Holds
}

// Descriptor is one node of a domain's tree: a key, an optional value (which
// may hold `*` wildcards) and the limits that apply when a request's walk
// ends here.
type Descriptor struct {
	Key   string
	Value string
	// Rules holds the node's limits: one from `rate_limit`, or several from
	// `rate_limits`. Empty when the node only leads to nested descriptors.
	Rules []*Rule

	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool
	ShareThreshold bool
	// Metadata is the free-form `metadata` mapping, nil when there is none.
	// It is any mapping (nested mappings, lists, numbers, bools), kept as
	// the google.protobuf.Struct that Envoy's dynamic metadata carries, as
	// envoyproxy/ratelimit keeps it.
	Metadata *structpb.Struct

	Descriptors []*Descriptor
	// Line is where the descriptor starts in its file.
	Line int
}

// Rule is one `rate_limit` body.
type Rule struct {
	Name      string
	Unlimited bool
	// Limit is what the stores decide; zero when Unlimited.
	Limit limits.Limit
	// Unit and UnitMultiplier are the period as written, reported to Envoy.
	Unit           Unit
	UnitMultiplier int64
	Replaces       []string
	// FailureMode is the limit's own failure mode; FailureModeDefault
	// defers to the -failure-mode flag.
	FailureMode FailureMode
	// CountRefused is count_refused as written; Limit.CountRefused holds
	// it too, for the stores.
	CountRefused bool
	// WarnAt are the soft thresholds of warn_at, fractions of the limit's
	// capacity in ascending order; nil for none (warn.go).
	WarnAt []float64
	Line   int
	// Candidate is a limit tried beside this one and never enforced
	// (candidate.go); nil for none.
	Candidate *Rule
}

// Unit is a rate limit unit of the limits file.
type Unit uint8

// The units; month is 30 days and year 365 days, as Envoy counts them.
const (
	UnitUnknown Unit = iota
	Second
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var unitNames = [...]string{"unknown", "second", "minute", "hour", "day", "week", "month", "year"}

// String returns the lower-case name used in the limits file.
func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return fmt.Sprintf("unit(%d)", uint8(u))
}

// Duration is the length of one unit.
func (u Unit) Duration() time.Duration {
	switch u {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 30 * 24 * time.Hour
	case Year:
		return 365 * 24 * time.Hour
	}
	return 0
}

// ParseUnit maps a unit name, in any case, to a Unit.
func ParseUnit(s string) (Unit, error) {
	for i, n := range unitNames[1:] {
		if equalFold(n, s) {
			return Unit(i + 1), nil
		}
	}
	return UnitUnknown, fmt.Errorf("unknown unit %q (want second, minute, hour, day, week, month or year)", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// FailureMode is what a limit answers when its store fails or times out.
type FailureMode uint8

// The failure modes. FailureModeDefault, the zero value, defers to the
// service-wide -failure-mode flag.
const (
	FailureModeDefault FailureMode = iota
	FailAllow
	FailDeny
	FailLocal
	FailError
)

var failureModeNames = [...]string{"default", "allow", "deny", "local", "error"}

// String returns the name used in flags and the limits file.
func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return fmt.Sprintf("failure_mode(%d)", uint8(m))
}

// ParseFailureMode maps allow, deny, local or error to a FailureMode.
func ParseFailureMode(s string) (FailureMode, error) {
	for i, n := range failureModeNames[1:] {
		if n == s {
			return FailureMode(i + 1), nil
		}
	}
	return FailureModeDefault, fmt.Errorf("unknown failure mode %q (want allow, deny, local or error)", s)
}
