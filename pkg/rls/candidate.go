package rls

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A limit's candidate (config.Rule.Candidate) is decided on every decision
// of its limit, in the same store call: one more hit in the plan, after
// every descriptor's, on a key of its own, never joint with anything, so
// that it neither touches the enforced limit's counters nor changes
// whether a run of them is charged. Nothing that answers reads it: the
// verdicts, the headers and the metadata read each descriptor's hits and
// results, which do not include it. Its result is counted
// (rls_candidate_decisions_total, rls_candidate_would_refuse_total) and
// shown by Explain, beside its limit's.
//
// A plan whose limits have no candidate has no such hit: finish counts
// none, and nothing here runs.

// tried is one candidate decided in a plan: the limit it is tried beside,
// of descriptor d.
type tried struct {
	d    *planned
	rule *config.Rule
}

// candidates is how many of rules have a candidate.
func candidates(rules []*config.Rule) int {
	n := 0
	for _, r := range rules {
		if r.Candidate != nil {
			n++
		}
	}
	return n
}

// candidateIndex is the index a candidate's key is named with: its
// limit's place in the list, as a negative number, which no enforced
// limit's key has. Its key differs from its limit's even when the two
// differ only in requests_per_unit, and keeps the descriptor's hash tag.
func candidateIndex(listIndex int) int { return -1 - listIndex }

// planCandidates lays out, after every descriptor's hits, one hit per
// candidate of a decided descriptor's limits, at the descriptor's cost and
// with its hold; a descriptor decided with an earlier one's counters is
// tried there too, since that one carries its cost. The room for them is
// already in p.hits and p.results (finish).
func (p *plan) planCandidates(s *Service, maxDelay time.Duration) {
	lo := len(p.hits)
	for i := range p.descs {
		d := &p.descs[i]
		if !d.decided() || d.sameAs != nil {
			continue
		}
		var keyEntries []descriptors.Entry // made for the first candidate only
		for j, r := range d.rules {
			c := r.Candidate
			if c == nil {
				continue
			}
			if keyEntries == nil {
				keyEntries = sharedEntries(d.entries, d.path)
			}
			key, tag := s.storeKey(p.domain, keyEntries, c.Limit, candidateIndex(listIndex(d, r, j)))
			p.hits = append(p.hits, limits.Hit{Key: key, Tag: tag, Limit: c.Limit, Cost: d.cost, MaxDelay: maxDelay, Hold: d.hold})
			p.tried = append(p.tried, tried{d: d, rule: r})
		}
	}
	hi := len(p.hits)
	p.triedHits, p.triedResults = p.hits[lo:hi:hi], p.results[lo:hi:hi]
}

// countCandidates counts each candidate the store decided for a hit that
// charges (a peek, a refund and the settle of a hold decide nothing a
// limit would refuse): whether it would have refused. domain is the
// metrics' domain label.
func (s *Service) countCandidates(p *plan, domain string) {
	for k, t := range p.tried {
		h, res := &p.triedHits[k], &p.triedResults[k]
		if res.Err != nil || h.Cost <= 0 || h.Hold.Settle {
			continue
		}
		s.metrics.CandidateDecided(domain, ruleName(t.d, t.rule), !res.Allowed)
	}
}

// triedOf returns the index in p.tried of the candidate of d's limit r,
// or -1 when it was not decided (r has none, or another limit replaces it).
func (p *plan) triedOf(d *planned, r *config.Rule) int {
	for k, t := range p.tried {
		if t.d == d && t.rule == r {
			return k
		}
	}
	return -1
}
