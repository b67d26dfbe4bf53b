package rls

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
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
	// Hold is set in a domain with holds: what the descriptor does with
	// them (explain_holds.go).
	Hold *ExplainedHold `json:"hold,omitempty"`
	// Outcome sums the explanation up in one sentence.
	Outcome string `json:"outcome"`
}

// ExplainedEntry is one key=value of the descriptor explained.
type ExplainedEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Hold is "id" or "settle" for an entry of the domain's holds, which
	// is not walked; empty for every other entry.
	Hold string `json:"hold,omitempty"`
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
	Index int `json:"index"`
	Line  int `json:"line,omitempty"`
	// ExplainedRate is what the limit counts, its fields the limit's own
	// in JSON.
	ExplainedRate
	// FailureMode is the mode in effect: the limit's own, or the
	// service's (FailureModeDefault then set).
	FailureMode        string `json:"failure_mode"`
	FailureModeDefault bool   `json:"failure_mode_default,omitempty"`
	Shadow             bool   `json:"shadow"`
	QuotaMode          bool   `json:"quota_mode,omitempty"`
	CountRefused       bool   `json:"count_refused,omitempty"`
	// BlockFor is the limit's block_for (Go duration), empty when it has
	// none.
	BlockFor string   `json:"block_for,omitempty"`
	Replaces []string `json:"replaces,omitempty"`
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
	// ModifiersExplained is what the limit's modifiers say of it now
	// (limits.Explain), its fields the limit's own in JSON.
	limits.ModifiersExplained
	// Lease is a concurrency limit's lease, and Slots its slots held,
	// oldest first (explain_slots.go); its unit is "unknown".
	Lease string          `json:"lease,omitempty"`
	Slots []ExplainedSlot `json:"slots,omitempty"`
	// Candidate is the limit's candidate, tried beside it and never
	// enforced (explain_candidate.go); nil for none.
	Candidate *ExplainedCandidate `json:"candidate,omitempty"`
}

// ExplainedRate is what a limit counts: its algorithm, requests and
// period, and a bucket's burst.
type ExplainedRate struct {
	Algorithm       string `json:"algorithm"`
	RequestsPerUnit int64  `json:"requests_per_unit"`
	Unit            string `json:"unit"`
	UnitMultiplier  int64  `json:"unit_multiplier"`
	// PeriodSeconds is the length of the window the limit counts in at
	// the instant explained: unit × unit_multiplier, or the real length
	// of the window a modifier makes it count in (limits.WindowLen).
	PeriodSeconds int64 `json:"period_seconds"`
	// Burst is the bucket's capacity (token_bucket) or queue length
	// (leaky_bucket); zero for the windows, which have none.
	Burst int64 `json:"burst"`
}

// explainRate is what limit r counts at now.
func explainRate(r *config.Rule, now time.Time) ExplainedRate {
	e := ExplainedRate{
		Algorithm:       r.Limit.Algorithm.String(),
		RequestsPerUnit: r.Limit.Requests,
		Unit:            r.Unit.String(),
		UnitMultiplier:  max(r.UnitMultiplier, 1),
		PeriodSeconds:   int64(limits.WindowLen(r.Limit, now.UnixMicro()) / time.Second),
	}
	if a := r.Limit.Algorithm; a == limits.TokenBucket || a == limits.LeakyBucket {
		e.Burst = r.Limit.Capacity()
	}
	return e
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
	// LockedUntil is, on a key that its lock refuses (block_for), the
	// instant the lock ends (RFC 3339, UTC): Reset is the time left on it.
	LockedUntil string `json:"locked_until,omitempty"`
	// Error is set when the store could not be read; the other fields are
	// then meaningless.
	Error string `json:"error,omitempty"`
}

// Explain tells what the service would do with one descriptor of domain:
// the walk of the config tree level by level, the limits matched, their
// store keys, and their state, read from the store with a peek that
// consumes nothing. It builds and settles the plan a request with this one
// descriptor would get, at cost 0, so it cannot disagree with
// ShouldRateLimit; it counts nothing in the metrics and applies no failure
// mode. Its error is the one ShouldRateLimit would answer a request with
// this one descriptor before planning it (checkOne); a store failure is
// reported in the limits' state.
func (s *Service) Explain(ctx context.Context, domain string, entries []descriptors.Entry) (Explanation, error) {
	ix, err := s.checkOne(domain, entries)
	if err != nil {
		return Explanation{}, err
	}
	p, err := s.peekOne(ctx, ix, domain, entries)
	if err != nil {
		return Explanation{}, err
	}
	defer p.release()
	ex := s.explanation(ix, p, &p.descs[0])
	if p.holds != nil {
		ex.Entries = explainedEntries(entries)
		ex.Hold = explainHold(p.holds, entries, ex.Entries)
	}
	s.explainSlots(ctx, &ex, &p.descs[0])
	return ex, nil
}

// checkOne refuses, as the decision does, the request of one descriptor
// that no config can answer (validate's bounds), then one that comes before
// any config has: it returns the index to plan on.
func (s *Service) checkOne(domain string, entries []descriptors.Entry) (*descriptors.Index, error) {
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	if err := checkEntries(0, len(entries)); err != nil {
		return nil, err
	}
	if ix := s.index.Load(); ix.Loaded() {
		return ix, nil
	}
	return nil, ErrNotLoaded
}

// planOne plans a request of one descriptor at cost 0 on ix: what Explain
// settles and Reset clears. The caller releases the plan.
func (s *Service) planOne(ix *descriptors.Index, domain string, entries []descriptors.Entry) (*plan, error) {
	p := newPlan(ix, domain, 1)
	in := descriptorInput{entries: entries}
	if p.holds != nil {
		// The walk and the keys are those of the entries less the holds'
		// (holds.go); the hold itself is left out: a peek holds nothing.
		p.entries = append(p.entries, entries...)
		if _, err := p.takeHold(0); err != nil {
			p.release()
			return nil, err
		}
		in.entries, in.hold = p.entries, limits.Hold{Lease: p.holds.Lease}
	}
	if err := p.add(s, ix, in); err != nil {
		p.release()
		return nil, err
	}
	p.finish(s, s.maxDelay)
	return p, nil
}

// peekOne plans a request of one descriptor at cost 0 on ix, reads the
// store with it and settles it: what Explain and Usage read, consuming
// nothing. The caller releases the plan.
func (s *Service) peekOne(ctx context.Context, ix *descriptors.Index, domain string, entries []descriptors.Entry) (*plan, error) {
	p, err := s.planOne(ix, domain, entries)
	if err != nil {
		return nil, err
	}
	if len(p.hits) > 0 {
		s.callStore(ctx, time.Now(), p.hits, p.results)
	}
	p.settle(s)
	return p, nil
}

// explanation reads what a settled plan says of its descriptor d.
func (s *Service) explanation(ix *descriptors.Index, p *plan, d *planned) Explanation {
	ex := Explanation{Domain: p.domain, DomainKnown: p.known, Levels: []ExplainedLevel{}, Limits: []ExplainedLimit{},
		Entries: explainedEntries(d.entries)}
	if !p.known {
		ex.Outcome = "unknown domain: every descriptor is answered OK, without a limit"
		return ex
	}
	if dom := ix.Config().Domains[p.domain]; dom != nil {
		ex.DomainFile = dom.File
	}
	// The walk is of d.entries: in a domain with holds, the request's
	// entries less the holds' (Explain then shows them all).
	walked := ex.Entries
	for i, n := range d.path {
		ex.Levels = append(ex.Levels, explainLevel(walked[i], n))
	}
	if d.node == nil && len(d.entries) == 0 {
		ex.Outcome = "no limit: the descriptor has only the entries of the domain's holds, so nothing is walked; answered OK without a limit"
		return ex
	}
	if d.node == nil {
		stop := len(d.path)
		ex.Levels = append(ex.Levels, ExplainedLevel{Entry: walked[stop], Match: MatchNone})
		ex.Outcome = fmt.Sprintf("no limit: no node matches entry %d (%s=%s), so the walk stops; answered OK without a limit",
			stop+1, d.entries[stop].Key, d.entries[stop].Value)
		return ex
	}
	ex.Node = d.node.Path
	desc := d.node.Descriptor
	switch {
	case len(desc.Rules) == 0:
		ex.Outcome = fmt.Sprintf("no limit: node %s has none (it only leads to nested descriptors); answered OK without a limit", d.node.Path)
		return ex
	case d.unlimited:
		ex.Unlimited = true
		ex.Outcome = fmt.Sprintf("unlimited: node %s is never counted; answered OK without a limit", d.node.Path)
		return ex
	}
	// Explain applies no failure mode: a failed read is shown as such.
	failed := firstError(d.results) != nil
	ex.Limits = s.explainLimits(p, d, failed)
	ex.Outcome = outcome(d, failed)
	return ex
}

// explainLimits explains each limit of d's node, with its state when it
// is decided; failed is whether a store read of d failed.
func (s *Service) explainLimits(p *plan, d *planned, failed bool) []ExplainedLimit {
	desc := d.node.Descriptor
	out := make([]ExplainedLimit, 0, len(desc.Rules))
	for i, r := range desc.Rules {
		l := explainLimit(r, i, desc, s.failureMode, s.statusShadow || s.overallShadow, p.now)
		l.ModifiersExplained = limits.Explain(r.Limit, p.now.UnixMicro())
		l.Candidate = p.explainCandidate(d, r)
		j := slices.Index(d.rules, r)
		if j < 0 {
			l.ReplacedBy = p.replacedBy[r.Name]
			out = append(out, l)
			continue
		}
		l.Key = d.hits[j].Key
		l.State = explainState(d.results[j], r.Limit, d.wait(j, p.now.UnixMicro()))
		l.Reported = !failed && r == d.verdict.rule
		out = append(out, l)
	}
	return out
}

// explainState is the state res, a peek's of a key of limit l, says,
// with wait its reset.
func explainState(res limits.Result, l limits.Limit, wait time.Duration) *ExplainedState {
	st := &ExplainedState{Capacity: l.Capacity()}
	if res.Err != nil {
		st.Error = res.Err.Error()
		return st
	}
	st.Allowed, st.Remaining = res.Allowed, res.Remaining
	st.Reset, st.ResetSeconds = wait.String(), wait.Seconds()
	if res.Locked {
		st.LockedUntil = time.Now().Add(res.ResetAfter).UTC().Format(time.RFC3339Nano)
	}
	return st
}

// outcome sums up in one sentence what a request of d's descriptor would
// get.
func outcome(d *planned, failed bool) string {
	v := d.verdict
	name := ruleName(d, v.rule)
	switch {
	case len(d.rules) == 0:
		return "no limit: every limit of the node is replaced by another; answered OK without a limit"
	case failed:
		return "the store could not be read: the descriptor would take its failure mode"
	case v.allowed:
		return fmt.Sprintf("a request of cost 1 would be allowed now; the status would report %s with %d remaining", name, v.remaining)
	case v.outcome == metrics.OutcomeShadowOver:
		return fmt.Sprintf("a request would be over %s, but in shadow mode: answered OK", name)
	case v.outcome == metrics.OutcomeQuotaOver:
		return fmt.Sprintf("a request would be over %s, a quota: its status OVER_LIMIT, the request refused only if every quota-mode descriptor of it is over", name)
	default:
		return fmt.Sprintf("a request would be refused (OVER_LIMIT) by %s for %s", name, v.wait)
	}
}

// explainedEntries are entries as an explanation shows them.
func explainedEntries(entries []descriptors.Entry) []ExplainedEntry {
	es := make([]ExplainedEntry, len(entries))
	for i, e := range entries {
		es[i] = ExplainedEntry{Key: e.Key, Value: e.Value}
	}
	return es
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

func explainLimit(r *config.Rule, index int, d *config.Descriptor, serviceMode config.FailureMode, shadowMode bool, now time.Time) ExplainedLimit {
	l := ExplainedLimit{
		Name:          r.Name,
		Index:         index,
		Line:          r.Line,
		ExplainedRate: explainRate(r, now),
		FailureMode:   r.FailureMode.String(),
		Shadow:        d.ShadowMode || shadowMode,
		QuotaMode:     d.QuotaMode,
		CountRefused:  r.Limit.CountRefused,
		Replaces:      r.Replaces,
	}
	if r.Limit.Algorithm == limits.Concurrency {
		l.Lease = r.Limit.Period.String()
	}
	if r.FailureMode == config.FailureModeDefault {
		l.FailureMode, l.FailureModeDefault = serviceMode.String(), true
	}
	if r.Limit.BlockFor > 0 {
		l.BlockFor = r.Limit.BlockFor.String()
	}
	return l
}
