package rls

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// ResetDone is what Reset cleared for one descriptor.
type ResetDone struct {
	Domain  string           `json:"domain"`
	Entries []ExplainedEntry `json:"entries"`
	// Node is the config path of the node the walk ended on.
	Node   string       `json:"node"`
	Limits []ResetLimit `json:"limits"`
}

// ResetLimit is one limit whose state Reset cleared.
type ResetLimit struct {
	Name      string `json:"name,omitempty"`
	Algorithm string `json:"algorithm"`
	Key       string `json:"key"`
}

// NoLimitError is Reset's error for a descriptor that no limit counts:
// Reason says why, as Explain's outcome does.
type NoLimitError struct{ Reason string }

func (e *NoLimitError) Error() string { return "nothing to reset: " + e.Reason }

// Reset clears the state of the limits one descriptor of domain matches,
// on the store and on the embedded store that failure mode local decides
// on, so that its next request is decided as a new one's: what lets a
// client through again. The limits are those a request with this one
// descriptor would be decided by (the plan Explain and ShouldRateLimit
// build), under their store keys. Its error is a *NoLimitError when no
// limit counts the descriptor, an error of the store's (which may have
// cleared part: resetting again is harmless), or, for a request the
// decision would refuse before planning, Explain's.
func (s *Service) Reset(ctx context.Context, domain string, entries []descriptors.Entry) (ResetDone, error) {
	ix, err := s.checkOne(domain, entries)
	if err != nil {
		return ResetDone{}, err
	}
	p, err := s.planOne(ix, domain, entries)
	if err != nil {
		return ResetDone{}, err
	}
	defer p.release()
	d := &p.descs[0]
	if len(d.hits) == 0 {
		ex, err := s.Explain(ctx, domain, entries) // no limit: no store call
		if err != nil {
			return ResetDone{}, err
		}
		return ResetDone{}, &NoLimitError{Reason: ex.Outcome}
	}
	done := ResetDone{Domain: domain, Node: d.node.Path}
	done.Entries = explainedEntries(entries)
	for j, r := range d.rules {
		done.Limits = append(done.Limits, ResetLimit{Name: r.Name, Algorithm: r.Limit.Algorithm.String(), Key: d.hits[j].Key})
	}
	// A limit's candidate starts again with it (candidate.go), so that
	// what it would refuse is still what it would have done in its place.
	hits := d.hits
	if len(p.triedHits) > 0 {
		hits = append(slices.Clone(d.hits), p.triedHits...)
	}
	err = limits.Reset(ctx, s.store, hits)
	if s.local != nil && s.local != s.store {
		if lerr := limits.Reset(ctx, s.local, hits); lerr != nil {
			err = errors.Join(err, fmt.Errorf("the embedded store of failure mode local: %w", lerr))
		}
	}
	if err != nil {
		return done, fmt.Errorf("reset %s: %w", d.node.Path, err)
	}
	return done, nil
}
