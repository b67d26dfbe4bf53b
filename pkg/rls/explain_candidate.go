package rls

import (
	"fmt"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// ExplainedCandidate is a limit's candidate (candidate.go) beside it in an
// explanation: what it counts, its own key, and what it would answer now.
type ExplainedCandidate struct {
	Line int `json:"line,omitempty"`
	ExplainedRate
	CountRefused bool   `json:"count_refused,omitempty"`
	BlockFor     string `json:"block_for,omitempty"`
	// Key is the candidate's own store key; empty when it is not decided
	// (its limit is replaced).
	Key string `json:"key,omitempty"`
	// State is what its key holds now, read by the same peek as its
	// limit's; nil when it is not decided.
	State *ExplainedState `json:"state,omitempty"`
}

// explainCandidate explains the candidate of d's limit r, nil when r has
// none; with its state when the plan decided it.
func (p *plan) explainCandidate(d *planned, r *config.Rule) *ExplainedCandidate {
	c := r.Candidate
	if c == nil {
		return nil
	}
	ec := &ExplainedCandidate{Line: c.Line, ExplainedRate: explainRate(c, p.now), CountRefused: c.Limit.CountRefused}
	if c.Limit.BlockFor > 0 {
		ec.BlockFor = c.Limit.BlockFor.String()
	}
	if k := p.triedOf(d, r); k >= 0 {
		res := p.triedResults[k]
		wait := res.RetryAfter
		if res.Allowed {
			wait = res.ResetAfter
		}
		ec.Key = p.triedHits[k].Key
		ec.State = explainState(res, c.Limit, wait)
	}
	return ec
}

// writeCandidate writes a limit's candidate under it, beside the limit's
// own state: what it is, its key, and whether it would refuse.
func writeCandidate(b *strings.Builder, c *ExplainedCandidate) {
	if c == nil {
		return
	}
	fmt.Fprintf(b, "      candidate (not enforced): %s, %d per %s", c.Algorithm, c.RequestsPerUnit, period(c.ExplainedRate))
	if c.Burst > 0 {
		fmt.Fprintf(b, ", burst %d", c.Burst)
	}
	if c.CountRefused {
		b.WriteString(", count_refused")
	}
	if c.BlockFor != "" {
		fmt.Fprintf(b, ", block_for %s", c.BlockFor)
	}
	if c.Line > 0 {
		fmt.Fprintf(b, " (line %d)", c.Line)
	}
	b.WriteString("\n")
	if c.Key == "" {
		return
	}
	fmt.Fprintf(b, "        key:   %s\n", c.Key)
	b.WriteString("        state: ")
	writeState(b, c.State, "a request of cost 1 would be allowed by it too", "it would refuse a request")
	b.WriteString("\n")
}
