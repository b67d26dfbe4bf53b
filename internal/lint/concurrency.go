package lint

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A concurrency limit takes a slot for each request and needs it back when
// the request ends: in Envoy, an entry on the request path takes it, and
// the same actions with apply_on_stream_done: true and hits_addend
// {number: 1, is_negative_hits: true} give it back (Envoy sends that call
// from the filter's onDestroy, for every request whose rate limit call
// completed). Envoy honours hits_addend only in a RateLimitPerRoute's
// rate_limits (typed_per_filter_config); elsewhere the release would be
// sent as a plain hit, which takes a slot. So lint reports, per route and
// concurrency limit: a release that Envoy does not send as one, or sends
// before the request is served; a hit on stream done that is not a
// release (it takes a slot nobody gives back); slots taken and never given
// back on that route (each held for the whole lease); slots given back
// that the route never takes (they free other requests' slots early); a
// release beside a limit without count_refused (Envoy sends it for a
// request it refused too, which then frees a slot of one in flight).

// slotUse is one concurrency limit as one route uses it.
type slotUse struct {
	route *routev3.Route
	node  *lnode
}

// slotBook is how each route uses each concurrency limit, in the order
// the entries came.
type slotBook struct {
	ways  map[slotUse]*slotWays
	order []slotUse
}

// slotWays is how a route uses a concurrency limit: where it takes slots
// and where it gives them back.
type slotWays struct {
	domain, path, file string
	line               int
	lease              string
	acquire, release   string
	countRefused       bool
}

// slotEntry records the concurrency limits entry e reaches (m, in tree t),
// and reports a release that is not one.
func (ck *checker) slotEntry(e *entry, t *tree, m *matchResult) {
	nodes := append([]*lnode(nil), m.limited...)
	for _, r := range m.restricted {
		nodes = append(nodes, r.node)
	}
	negative, done := e.rl.GetHitsAddend().GetIsNegativeHits(), e.rl.GetApplyOnStreamDone()
	for _, n := range nodes {
		rule := concurrencyRule(n)
		if rule == nil {
			continue
		}
		at := fmt.Sprintf("%s:%d", t.domain.File, rule.Line)
		limit := e.domain + "." + n.Path
		switch {
		case negative && !e.perRoute:
			ck.add(Finding{Kind: Concurrency, Route: e.where, Limit: limit,
				Message: fmt.Sprintf("hits_addend is honoured only in a RateLimitPerRoute's rate_limits (typed_per_filter_config): here Envoy sends a plain hit, which takes a slot of the concurrency limit (%s) instead of giving one back", at)})
			continue
		case negative && !done:
			ck.add(Finding{Kind: Concurrency, Route: e.where, Limit: limit,
				Message: fmt.Sprintf("a release of the concurrency limit (%s) on the request path gives the slot back before the request is served: set apply_on_stream_done: true", at)})
			continue
		case done && !negative:
			ck.add(Finding{Kind: Concurrency, Route: e.where, Limit: limit,
				Message: fmt.Sprintf("a hit on stream done takes a slot of the concurrency limit (%s) that nothing gives back: set hits_addend {number: 1, is_negative_hits: true} to release", at)})
			continue
		}
		if ck.slots.ways == nil {
			ck.slots.ways = make(map[slotUse]*slotWays)
		}
		u := slotUse{e.route, n}
		w := ck.slots.ways[u]
		if w == nil {
			w = &slotWays{domain: e.domain, path: n.Path, file: t.domain.File, line: rule.Line, lease: rule.Limit.Period.String(), countRefused: rule.Limit.CountRefused}
			ck.slots.ways[u] = w
			ck.slots.order = append(ck.slots.order, u)
		}
		if negative {
			w.release = e.where
		} else {
			w.acquire = e.where
		}
	}
}

// concurrencyRule is node n's concurrency limit, or nil.
func concurrencyRule(n *lnode) *config.Rule {
	for _, r := range n.Descriptor.Rules {
		if !r.Unlimited && r.Limit.Algorithm == limits.Concurrency {
			return r
		}
	}
	return nil
}

// unreleased reports the routes that take slots of a concurrency limit
// and never give them back, or give back slots they never take, in the
// order the entries came.
func (ck *checker) unreleased() {
	for _, u := range ck.slots.order {
		w := ck.slots.ways[u]
		limit := w.domain + "." + w.path
		switch {
		case w.release == "":
			ck.add(Finding{Kind: Concurrency, Route: w.acquire, Limit: limit,
				Message: fmt.Sprintf("takes slots of the concurrency limit (%s:%d) and never gives them back: each stays held for the whole lease (%s); add the same actions with apply_on_stream_done: true and hits_addend {number: 1, is_negative_hits: true}", w.file, w.line, w.lease)})
		case w.acquire == "":
			ck.add(Finding{Kind: Concurrency, Route: w.release, Limit: limit,
				Message: fmt.Sprintf("gives back slots of the concurrency limit (%s:%d) that this route never takes: each release frees another request's slot early", w.file, w.line)})
		case !w.countRefused:
			ck.add(Finding{Kind: Concurrency, Route: w.release, Limit: limit,
				Message: fmt.Sprintf("Envoy sends this release for refused requests too, and the concurrency limit (%s:%d) does not count refused hits: each refused request frees a slot of one still in flight; set count_refused: true", w.file, w.line)})
		}
	}
}

// quotaConcurrency reports a concurrency limit that an RLQS bucket (at
// where) reaches: RLQS leaves it out of the bucket's rate, and answers a
// bucket whose limits are all concurrency limits ALLOW_ALL.
func (ck *checker) quotaConcurrency(where, domain string, t *tree, n *lnode) {
	rule := concurrencyRule(n)
	if rule == nil {
		return
	}
	ck.add(Finding{Kind: Concurrency, Route: where, Limit: domain + "." + n.Path,
		Message: fmt.Sprintf("RLQS does not enforce the concurrency limit (%s:%d): a token bucket cannot bound the requests in flight, so the bucket is divided by the node's other limits, or answered ALLOW_ALL if it has none; send it to the rate limit filter instead", t.domain.File, rule.Line)})
}
