package rls

import (
	"fmt"
	"io"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// WriteText writes the explanation for a person to read: the domain and
// descriptor, the walk down the config's tree, each limit with its key
// and state, and the outcome.
func (ex Explanation) WriteText(w io.Writer) error {
	var b strings.Builder
	ex.writeHead(&b)
	if len(ex.Levels) > 0 {
		b.WriteString("walk:\n")
	}
	for i, lv := range ex.Levels {
		writeLevel(&b, i, lv)
	}
	if len(ex.Limits) > 0 {
		b.WriteString("limits:\n")
	}
	for _, l := range ex.Limits {
		writeLimit(&b, l)
		writeCandidate(&b, l.Candidate) // explain_candidate.go
	}
	fmt.Fprintf(&b, "outcome:    %s\n", ex.Outcome)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHead writes the domain, and the file that defines it, and the
// descriptor's entries.
func (ex Explanation) writeHead(b *strings.Builder) {
	entries := make([]string, len(ex.Entries))
	for i, e := range ex.Entries {
		entries[i] = entryText(e) // explain_holds.go
	}
	fmt.Fprintf(b, "domain:     %s", ex.Domain)
	switch {
	case !ex.DomainKnown:
		b.WriteString(" (unknown)\n")
	case ex.DomainFile != "":
		fmt.Fprintf(b, " (%s)\n", ex.DomainFile)
	default:
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "descriptor: %s\n", strings.Join(entries, ", "))
	writeHold(b, ex.Hold)
}

// writeLevel writes step i of the walk: how entry lv matched, and the node
// it led to.
func writeLevel(b *strings.Builder, i int, lv ExplainedLevel) {
	fmt.Fprintf(b, "  %d. %s=%s: ", i+1, lv.Entry.Key, lv.Entry.Value)
	switch lv.Match {
	case MatchNone:
		b.WriteString("no match (no exact value, wildcard or bare key for it here)\n")
		return
	case MatchExact:
		fmt.Fprintf(b, "exact value %q", lv.Pattern)
	case MatchWildcard:
		fmt.Fprintf(b, "wildcard %q", lv.Pattern)
		if lv.ShareThreshold {
			b.WriteString(" (share_threshold: all its values share one counter)")
		}
	case MatchBare:
		fmt.Fprintf(b, "bare key %s (one counter per value)", lv.Entry.Key)
	}
	fmt.Fprintf(b, " -> node %s", lv.Node)
	if lv.Line > 0 {
		fmt.Fprintf(b, " (line %d)", lv.Line)
	}
	b.WriteString("\n")
}

// writeLimit writes one limit: what it is, then its key and state, or
// what replaced it.
func writeLimit(b *strings.Builder, l ExplainedLimit) {
	name := l.Name
	if name == "" {
		name = "(unnamed)"
	}
	rate := fmt.Sprintf("%d per %s", l.RequestsPerUnit, period(l.ExplainedRate))
	if l.Lease != "" {
		rate = fmt.Sprintf("%d slots, lease %s", l.RequestsPerUnit, l.Lease)
	}
	fmt.Fprintf(b, "  [%d] %s: %s, %s", l.Index, name, l.Algorithm, rate)
	if l.Burst > 0 {
		fmt.Fprintf(b, ", burst %d", l.Burst)
	}
	fmt.Fprintf(b, ", failure mode %s", l.FailureMode)
	if l.FailureModeDefault {
		b.WriteString(" (the service's)")
	}
	fmt.Fprintf(b, ", shadow %t", l.Shadow)
	if l.QuotaMode {
		b.WriteString(", quota mode")
	}
	if l.CountRefused {
		b.WriteString(", count_refused")
	}
	if l.BlockFor != "" {
		fmt.Fprintf(b, ", block_for %s", l.BlockFor)
	}
	if len(l.Replaces) > 0 {
		fmt.Fprintf(b, ", replaces %s", strings.Join(l.Replaces, ", "))
	}
	if l.Line > 0 {
		fmt.Fprintf(b, " (line %d)", l.Line)
	}
	b.WriteString("\n")
	if l.ReplacedBy != "" {
		fmt.Fprintf(b, "      replaced by %s: not decided\n", l.ReplacedBy)
		return
	}
	fmt.Fprintf(b, "      key:   %s\n", l.Key)
	writeModifiers(b, l.ModifiersExplained)
	if st := l.State; st != nil {
		b.WriteString("      state: ")
		writeState(b, st, "a request of cost 1 would be allowed", "a request would be refused")
		if st.Error == "" && l.Reported {
			b.WriteString(" (the status reports this limit)")
		}
		b.WriteString("\n")
		if st.Error == "" {
			writeSlots(b, l)
		}
	}
}

// writeState writes what state st says: that the store failed, or what
// remains and whether a request would be allowed (said as allowed) or
// refused (said as refused).
func writeState(b *strings.Builder, st *ExplainedState, allowed, refused string) {
	if st.Error != "" {
		fmt.Fprintf(b, "unknown, the store failed: %s", st.Error)
		return
	}
	verdict := allowed
	switch {
	case st.LockedUntil != "":
		verdict = "locked until " + st.LockedUntil + ": " + refused
	case !st.Allowed:
		verdict = refused
	}
	fmt.Fprintf(b, "remaining %d of %d, reset %s; %s", st.Remaining, st.Capacity, st.Reset, verdict)
}

// writeModifiers writes the lines a limit's modifiers explain it with.
func writeModifiers(b *strings.Builder, e limits.ModifiersExplained) {
	for _, line := range e.Lines() {
		fmt.Fprintf(b, "      %s\n", line)
	}
}

// period renders a limit's period as the file writes it: `hour`, `30 seconds`.
func period(l ExplainedRate) string {
	if l.UnitMultiplier > 1 {
		return fmt.Sprintf("%d %ss", l.UnitMultiplier, l.Unit)
	}
	return l.Unit
}
