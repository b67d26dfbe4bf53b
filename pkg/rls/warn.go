package rls

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Soft thresholds (warn_at, config/warn.go). A limit's usage after a
// decision is its capacity less the remaining the store answered: hits
// counted in a window, tokens taken from a bucket, requests queued in a
// leaky bucket, slots held by a concurrency limit. A descriptor has
// reached threshold t of a limit when usage/capacity ≥ t. The answer's
// dynamic metadata then says, for each descriptor that reached one, the
// highest, under the key "warn":
//
//	warn:
//	  threshold: 0.8     the highest any descriptor of the request reached
//	  descriptors:       one per descriptor that reached one, in request order
//	    - {index: 0, rule: api-daily, threshold: 0.8, used: 850, capacity: 1000}
//
// A hit that moved a limit's usage from below a threshold to it or above
// crossed it, and is counted once per threshold in the metrics
// (rls_warn_crossed_total). Only admitted hits that charge a known cost
// cross: a refused hit has its refusal, and a peek, a refund, a repeated
// reservation or the settle of a hold (whose net charge the service does
// not see) moves usage up by nothing it knows.
//
// A request whose descriptors match no limit with warn_at is answered and
// counted exactly as before warn_at existed: plan.warns is false and
// nothing here runs.

// warnLevel is the highest threshold a descriptor's usage has reached of
// its limits' warn_at.
type warnLevel struct {
	rule      *config.Rule
	threshold float64
	used      int64
	capacity  int64
}

// usage is limit j of d's usage after the decision, and its capacity;
// ok is false when the store gave no answer or the limit has no room.
func (d *planned) usage(j int) (used, capacity int64, ok bool) {
	r := d.results[j]
	capacity = d.rules[j].Limit.Capacity()
	if r.Err != nil || capacity <= 0 {
		return 0, 0, false
	}
	return capacity - min(max(r.Remaining, 0), capacity), capacity, true
}

// reached returns the highest threshold of ts that used of capacity has
// reached, or 0.
func reached(ts []float64, used, capacity int64) float64 {
	f := float64(used) / float64(capacity)
	top := 0.0
	for _, t := range ts {
		if f >= t {
			top = t
		}
	}
	return top
}

// warnLevel is the highest threshold d reached, over its limits with
// warn_at (on a tie, the limit the more used); ok is false when it
// reached none, or its state is not known.
func (d *planned) warnLevel() (warnLevel, bool) {
	if d.sameAs != nil {
		return d.sameAs.warnLevel()
	}
	var best warnLevel
	if !d.decided() || d.failure != nil || len(d.results) != len(d.rules) {
		return best, false
	}
	for j, r := range d.rules {
		if len(r.WarnAt) == 0 {
			continue
		}
		used, capacity, ok := d.usage(j)
		if !ok {
			continue
		}
		t := reached(r.WarnAt, used, capacity)
		if t > best.threshold || t > 0 && t == best.threshold && float64(used)/float64(capacity) > float64(best.used)/float64(best.capacity) {
			best = warnLevel{rule: r, threshold: t, used: used, capacity: capacity}
		}
	}
	return best, best.threshold > 0
}

// countCrossings counts, for each limit of d with warn_at, the thresholds
// its hit crossed.
func (s *Service) countCrossings(domain string, d *planned) {
	if d.sameAs != nil || !d.decided() || d.failure != nil || !d.verdict.allowed || d.cost <= 0 {
		return
	}
	for j, r := range d.rules {
		if len(r.WarnAt) == 0 {
			continue
		}
		if h := d.results[j].Hold; h == limits.HoldRepeated || h == limits.HoldSettled {
			continue
		}
		used, capacity, ok := d.usage(j)
		if !ok {
			continue
		}
		after := float64(used) / float64(capacity)
		before := float64(max(used-d.cost, 0)) / float64(capacity)
		for _, t := range r.WarnAt {
			if before < t && t <= after {
				s.metrics.WarnCrossed(domain, ruleName(d, r), config.FormatFraction(t))
			}
		}
	}
}

// warn adds the "warn" entry to resp's dynamic metadata when a descriptor
// of p reached a threshold, and counts the thresholds its hits crossed;
// domain is the metrics' domain label.
func (s *Service) warn(p *plan, resp *rlsv3.RateLimitResponse, domain string) {
	var list []*structpb.Value
	top := 0.0
	for i := range p.descs {
		d := &p.descs[i]
		s.countCrossings(domain, d)
		w, ok := d.warnLevel()
		if !ok {
			continue
		}
		top = max(top, w.threshold)
		list = append(list, structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"index":     structpb.NewNumberValue(float64(i)),
			"rule":      structpb.NewStringValue(ruleName(d, w.rule)),
			"threshold": structpb.NewNumberValue(w.threshold),
			"used":      structpb.NewNumberValue(float64(w.used)),
			"capacity":  structpb.NewNumberValue(float64(w.capacity)),
		}}))
	}
	if len(list) == 0 {
		return
	}
	if resp.DynamicMetadata == nil {
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	resp.DynamicMetadata.Fields["warn"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"threshold":   structpb.NewNumberValue(top),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: list}),
	}})
}
