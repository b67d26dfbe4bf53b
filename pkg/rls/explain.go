package rls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// How an entry of the walk matched a node of the config tree.
const (
	MatchExact    = "exact"    // the node's key and value equal the entry's
	MatchWildcard = "wildcard" // the node's value is a `*` pattern the value matches
	MatchBare     = "bare"     // the node has the key and no value: one counter per value
	MatchNone     = "none"     // no node at this level: the walk stops
)

// Explanation says what the service does with one descriptor: whether the
// domain is configured, which node the walk matched at each level, the
// limits that apply, the store key of each and its current state, read with
// a peek (cost 0: nothing is consumed).
type Explanation struct {
	Domain      string           `json:"domain"`
	DomainKnown bool             `json:"domain_known"`
	DomainFile  string           `json:"domain_file,omitempty"`
	Entries     []ExplainedEntry `json:"entries"`
	// Levels has one element per entry the walk reached: the last one is
	// MatchNone when the walk stopped early.
	Levels []ExplainedLevel `json:"levels"`
	// Node is the config path of the node the walk ended on, when it ended
	// on the last entry; empty otherwise.
	Node string `json:"node,omitempty"`
	// Unlimited is set when the node's limit is `unlimited: true`: the
	// descriptor is never counted.
	Unlimited bool `json:"unlimited,omitempty"`
	// Limits are the node's limits, in config order (several for a
	// rate_limits list).
	Limits []ExplainedLimit `json:"limits"`
	// Outcome sums the explanation up in one sentence.
	Outcome string `json:"outcome"`
}

// ExplainedEntry is one key=value of the descriptor explained.
type ExplainedEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ExplainedLevel is one step of the walk.
type ExplainedLevel struct {
	Entry ExplainedEntry `json:"entry"`
	// Match is MatchExact, MatchWildcard, MatchBare or MatchNone.
	Match string `json:"match"`
	// Node is the config path of the matched node (`path_/api/*.user`).
	Node string `json:"node,omitempty"`
	// Pattern is the matched node's value: the pattern of a wildcard, the
	// value of an exact match; empty for a bare key.
	Pattern string `json:"pattern,omitempty"`
	// Line is where the matched node starts in its file.
	Line int `json:"line,omitempty"`
	// ShareThreshold is set on a wildcard whose values share one counter.
	ShareThreshold bool `json:"share_threshold,omitempty"`
}

// ExplainedLimit is one limit that applies to the descriptor.
type ExplainedLimit struct {
	Name string `json:"name,omitempty"`
	// Index is the limit's place in its descriptor's rate_limits list.
	Index           int    `json:"index"`
	Line            int    `json:"line,omitempty"`
	Algorithm       string `json:"algorithm"`
	RequestsPerUnit int64  `json:"requests_per_unit"`
	Unit            string `json:"unit"`
	UnitMultiplier  int64  `json:"unit_multiplier"`
	PeriodSeconds   int64  `json:"period_seconds"`
	// Burst is the bucket's capacity (token_bucket) or queue length
	// (leaky_bucket); zero for the windows, which have none.
	Burst int64 `json:"burst"`
	// FailureMode is the mode in effect: the limit's own, or the
	// service's (FailureModeDefault then set).
	FailureMode        string   `json:"failure_mode"`
	FailureModeDefault bool     `json:"failure_mode_default,omitempty"`
	Shadow             bool     `json:"shadow"`
	QuotaMode          bool     `json:"quota_mode,omitempty"`
	CountRefused       bool     `json:"count_refused,omitempty"`
	Replaces           []string `json:"replaces,omitempty"`
	// ReplacedBy names the limit of the same descriptor whose `replaces`
	// drops this one: it is not decided (a limit of another descriptor of
	// the same request may drop it too, which one descriptor cannot show).
	ReplacedBy string `json:"replaced_by,omitempty"`
	// Key is the store key the limit is counted under.
	Key string `json:"key,omitempty"`
	// State is what the store holds now; nil for a replaced limit.
	State *ExplainedState `json:"state,omitempty"`
	// Reported is set on the limit a status would report: the least
	// remaining, or the refusing one with the longest wait.
	Reported bool `json:"reported,omitempty"`
}

// ExplainedState is the current state of one key, read with a peek.
type ExplainedState struct {
	// Allowed reports whether a request of cost 1 would be allowed now.
	Allowed bool `json:"allowed"`
	// Remaining is how many requests of cost 1 would be allowed now, of
	// Capacity.
	Remaining int64 `json:"remaining"`
	Capacity  int64 `json:"capacity"`
	// Reset is, when allowed, the wait until Remaining is back at Capacity;
	// otherwise the wait until a request would be allowed.
	Reset        string  `json:"reset"`
	ResetSeconds float64 `json:"reset_seconds"`
	// Error is set when the store could not be read; the other fields are
	// then meaningless.
	Error string `json:"error,omitempty"`
}

// Explain tells what the service would do with one descriptor of domain:
// the walk of the config tree level by level, the limits matched, their
// store keys, and their state, read from the store with a peek that
// consumes nothing. It counts nothing in the metrics. Its error is for a
// request no call could make (an empty domain, no entries, too many); a
// store failure is reported in the limits' state instead.
func (s *Service) Explain(ctx context.Context, domain string, entries []descriptors.Entry) (Explanation, error) {
	switch {
	case domain == "":
		return Explanation{}, errors.New("domain must not be empty")
	case len(entries) == 0:
		return Explanation{}, errors.New("the descriptor has no entries")
	case len(entries) > MaxEntries:
		return Explanation{}, fmt.Errorf("the descriptor has %d entries, above the maximum of %d", len(entries), MaxEntries)
	}
	ix := s.index.Load()
	ex := Explanation{Domain: domain, Levels: []ExplainedLevel{}, Limits: []ExplainedLimit{}}
	for _, e := range entries {
		ex.Entries = append(ex.Entries, ExplainedEntry(e))
	}
	node, known, path := ix.Match(domain, entries, nil)
	ex.DomainKnown = known
	if !known {
		ex.Outcome = "unknown domain: every descriptor is answered OK, without a limit"
		return ex, nil
	}
	if d := ix.Config().Domains[domain]; d != nil {
		ex.DomainFile = d.File
	}
	for i, n := range path {
		ex.Levels = append(ex.Levels, explainLevel(ex.Entries[i], n))
	}
	if len(path) < len(entries) {
		ex.Levels = append(ex.Levels, ExplainedLevel{Entry: ex.Entries[len(path)], Match: MatchNone})
		ex.Outcome = fmt.Sprintf("no limit: no node matches entry %d (%s=%s), so the walk stops; answered OK without a limit",
			len(path)+1, entries[len(path)].Key, entries[len(path)].Value)
		return ex, nil
	}
	ex.Node = node.Path
	d := node.Descriptor
	switch {
	case len(d.Rules) == 0:
		ex.Outcome = fmt.Sprintf("no limit: node %s has none (it only leads to nested descriptors); answered OK without a limit", node.Path)
		return ex, nil
	case len(d.Rules) == 1 && d.Rules[0].Unlimited:
		ex.Unlimited = true
		ex.Outcome = fmt.Sprintf("unlimited: node %s is never counted; answered OK without a limit", node.Path)
		return ex, nil
	}

	// Keys exactly as decide names them: share_threshold wildcards count
	// under their pattern.
	keyEntries := sharedEntries(entries, path)
	replacedBy := map[string]string{}
	for _, r := range d.Rules {
		for _, name := range r.Replaces {
			replacedBy[name] = r.Name
		}
	}
	var hits []limits.Hit
	var peeked []int // the index in ex.Limits of each hit
	for j, r := range d.Rules {
		l := explainLimit(r, j, d, s.failureMode, s.shadowMode)
		if by, ok := replacedBy[r.Name]; ok && r.Name != "" {
			l.ReplacedBy = by
		} else {
			key, tag := s.storeKey(domain, keyEntries, r.Limit, j)
			l.Key = key
			hits = append(hits, limits.Hit{Key: key, Tag: tag, Limit: r.Limit, Cost: 0})
			peeked = append(peeked, j)
		}
		ex.Limits = append(ex.Limits, l)
	}
	if len(hits) == 0 {
		ex.Outcome = "no limit: every limit of the node is replaced by another; answered OK without a limit"
		return ex, nil
	}

	results := make([]limits.Result, len(hits))
	sctx, cancel := context.WithTimeout(ctx, s.storeTimeout)
	s.store.Decide(sctx, hits, results)
	cancel()
	allowed, failed := true, false
	for k, res := range results {
		l := &ex.Limits[peeked[k]]
		st := &ExplainedState{Capacity: hits[k].Limit.Capacity()}
		if res.Err != nil {
			st.Error = res.Err.Error()
			failed = true
		} else {
			st.Allowed, st.Remaining = res.Allowed, res.Remaining
			reset := resetOf(res)
			st.Reset, st.ResetSeconds = reset.String(), reset.Seconds()
			allowed = allowed && res.Allowed
		}
		l.State = st
	}
	if failed {
		ex.Outcome = "the store could not be read: the descriptor would take its failure mode"
		return ex, nil
	}
	rep := &ex.Limits[peeked[reported(results, allowed)]]
	rep.Reported = true
	name := rep.Name
	if name == "" {
		name = node.Path
	}
	switch {
	case allowed:
		ex.Outcome = fmt.Sprintf("a request of cost 1 would be allowed now; the status would report %s with %d remaining", name, rep.State.Remaining)
	case rep.Shadow:
		ex.Outcome = fmt.Sprintf("a request would be over %s, but in shadow mode: answered OK", name)
	case rep.QuotaMode:
		ex.Outcome = fmt.Sprintf("a request would be over %s, but in quota mode: answered OK, listed in quotaModeViolations", name)
	default:
		ex.Outcome = fmt.Sprintf("a request would be refused (OVER_LIMIT) by %s for %s", name, rep.State.Reset)
	}
	return ex, nil
}

func explainLevel(e ExplainedEntry, n *descriptors.Node) ExplainedLevel {
	lv := ExplainedLevel{Entry: e, Node: n.Path, Line: n.Descriptor.Line, Pattern: n.Descriptor.Value}
	switch {
	case n.Descriptor.Value == "":
		lv.Match = MatchBare
	case n.Wildcard:
		lv.Match = MatchWildcard
		lv.ShareThreshold = n.Descriptor.ShareThreshold
	default:
		lv.Match = MatchExact
	}
	return lv
}

func explainLimit(r *config.Rule, index int, d *config.Descriptor, serviceMode config.FailureMode, shadowMode bool) ExplainedLimit {
	l := ExplainedLimit{
		Name:            r.Name,
		Index:           index,
		Line:            r.Line,
		Algorithm:       r.Limit.Algorithm.String(),
		RequestsPerUnit: r.Limit.Requests,
		Unit:            r.Unit.String(),
		UnitMultiplier:  max(r.UnitMultiplier, 1),
		PeriodSeconds:   int64(r.Limit.Period / time.Second),
		FailureMode:     r.FailureMode.String(),
		Shadow:          d.ShadowMode || shadowMode,
		QuotaMode:       d.QuotaMode,
		CountRefused:    r.Limit.CountRefused,
		Replaces:        r.Replaces,
	}
	if a := r.Limit.Algorithm; a == limits.TokenBucket || a == limits.LeakyBucket {
		l.Burst = r.Limit.Capacity()
	}
	if r.FailureMode == config.FailureModeDefault {
		l.FailureMode, l.FailureModeDefault = serviceMode.String(), true
	}
	return l
}

// WriteText writes the explanation for a person to read.
func (ex Explanation) WriteText(w io.Writer) error {
	var b strings.Builder
	entries := make([]string, len(ex.Entries))
	for i, e := range ex.Entries {
		entries[i] = e.Key + "=" + e.Value
	}
	fmt.Fprintf(&b, "domain:     %s", ex.Domain)
	switch {
	case !ex.DomainKnown:
		b.WriteString(" (unknown)\n")
	case ex.DomainFile != "":
		fmt.Fprintf(&b, " (%s)\n", ex.DomainFile)
	default:
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "descriptor: %s\n", strings.Join(entries, ", "))
	if len(ex.Levels) > 0 {
		b.WriteString("walk:\n")
	}
	for i, lv := range ex.Levels {
		fmt.Fprintf(&b, "  %d. %s=%s: ", i+1, lv.Entry.Key, lv.Entry.Value)
		switch lv.Match {
		case MatchNone:
			b.WriteString("no match (no exact value, wildcard or bare key for it here)\n")
			continue
		case MatchExact:
			fmt.Fprintf(&b, "exact value %q", lv.Pattern)
		case MatchWildcard:
			fmt.Fprintf(&b, "wildcard %q", lv.Pattern)
			if lv.ShareThreshold {
				b.WriteString(" (share_threshold: all its values share one counter)")
			}
		case MatchBare:
			fmt.Fprintf(&b, "bare key %s (one counter per value)", lv.Entry.Key)
		}
		fmt.Fprintf(&b, " -> node %s", lv.Node)
		if lv.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", lv.Line)
		}
		b.WriteString("\n")
	}
	if len(ex.Limits) > 0 {
		b.WriteString("limits:\n")
	}
	for _, l := range ex.Limits {
		name := l.Name
		if name == "" {
			name = "(unnamed)"
		}
		fmt.Fprintf(&b, "  [%d] %s: %s, %d per %s", l.Index, name, l.Algorithm, l.RequestsPerUnit, period(l))
		if l.Burst > 0 {
			fmt.Fprintf(&b, ", burst %d", l.Burst)
		}
		fmt.Fprintf(&b, ", failure mode %s", l.FailureMode)
		if l.FailureModeDefault {
			b.WriteString(" (the service's)")
		}
		fmt.Fprintf(&b, ", shadow %t", l.Shadow)
		if l.QuotaMode {
			b.WriteString(", quota mode")
		}
		if l.CountRefused {
			b.WriteString(", count_refused")
		}
		if len(l.Replaces) > 0 {
			fmt.Fprintf(&b, ", replaces %s", strings.Join(l.Replaces, ", "))
		}
		if l.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", l.Line)
		}
		b.WriteString("\n")
		if l.ReplacedBy != "" {
			fmt.Fprintf(&b, "      replaced by %s: not decided\n", l.ReplacedBy)
			continue
		}
		fmt.Fprintf(&b, "      key:   %s\n", l.Key)
		switch st := l.State; {
		case st == nil:
		case st.Error != "":
			fmt.Fprintf(&b, "      state: unknown, the store failed: %s\n", st.Error)
		default:
			verdict := "a request of cost 1 would be allowed"
			if !st.Allowed {
				verdict = "a request would be refused"
			}
			fmt.Fprintf(&b, "      state: remaining %d of %d, reset %s; %s", st.Remaining, st.Capacity, st.Reset, verdict)
			if l.Reported {
				b.WriteString(" (the status reports this limit)")
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "outcome:    %s\n", ex.Outcome)
	_, err := io.WriteString(w, b.String())
	return err
}

// period renders a limit's period as the file writes it: `hour`, `30 seconds`.
func period(l ExplainedLimit) string {
	if l.UnitMultiplier > 1 {
		return fmt.Sprintf("%d %ss", l.UnitMultiplier, l.Unit)
	}
	return l.Unit
}
