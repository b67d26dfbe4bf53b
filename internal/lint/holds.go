package lint

import (
	"fmt"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A domain with holds (config.Holds) names a call by its id entry and
// marks the call that settles it by its settle entry; envoy-rls takes both
// out of a descriptor before the match, so lint matches a shape without
// them. In Envoy, a route reserves with an entry on the request path that
// carries the id (request_headers on x-request-id) and a positive
// hits_addend, and settles with the same actions plus a generic_key
// settle entry, apply_on_stream_done: true and the actual cost. So lint
// reports, for such a domain: a settle on the request path (it ends the
// hold before the call is served); a settle without the id (a plain
// charge); an id on stream done without the settle (a reserve after the
// call, which nothing settles); an id of one known value (every call
// after the first would be a retry of it, charged nothing); a settle
// whose hits_addend Envoy does not send; per route and limit, a reserve
// that no stream-done entry of the route settles (the bound stays held
// for the whole lease); and a domain whose routes send no id at all.
// Entries that reserve or settle are judged here, not as concurrency
// acquires and releases (concurrency.go): a settle frees exactly its
// id's slots, whatever count_refused says.

// holdRole is what an entry's descriptor does with a hold.
type holdRole uint8

const (
	// notHeld: no holds in the domain, no id, or a peek or a refund with
	// one: decided as a hit without a hold.
	notHeld holdRole = iota
	reserves
	settles
	// misheld: a mistake holdShape reported; nothing more is recorded.
	misheld
)

// holdBook is, per route and limit of a holds domain, where the route
// reserves and where it settles, in the order the entries came.
type holdBook struct {
	ways  map[slotUse]*holdWays
	order []slotUse
	// idSent holds the domains some entry sends an id to.
	idSent map[string]bool
	// policyOnly holds the domains that forward-auth policies use and no
	// Envoy filter does: forwardAuthHolds judges their ids, and asking
	// for one that forward-auth can never settle would be wrong.
	policyOnly map[string]bool
}

type holdWays struct {
	domain, path, file string
	line               int
	lease              string
	concurrency        bool
	reserve, settle    string
}

// holdShape returns the entries of shape s that envoy-rls matches (all
// but the id and the settle, in a holds domain) and what s does with a
// hold, reporting a mistake in how it is sent.
func (ck *checker) holdShape(e *entry, t *tree, s shape) ([]item, holdRole) {
	h := t.domain.Holds
	if h == nil {
		return s.items, notHeld
	}
	var id, settle *item
	items := make([]item, 0, len(s.items))
	for i := range s.items {
		switch s.items[i].key {
		case h.ID:
			id = &s.items[i]
		case h.Settle:
			settle = &s.items[i]
		default:
			items = append(items, s.items[i])
		}
	}
	if id != nil {
		if ck.holds.idSent == nil {
			ck.holds.idSent = make(map[string]bool)
		}
		ck.holds.idSent[e.domain] = true
	}
	role, msg := holdRoleOf(e, h, id, settle)
	if msg != "" {
		ck.add(Finding{Kind: Holds, Route: e.where, Limit: e.domain, Message: msg})
	}
	return items, role
}

// holdRoleOf judges an entry of a holds domain h whose shape carries id
// and settle (nil when absent): its role, and what is wrong with it.
func holdRoleOf(e *entry, h *config.Holds, id, settle *item) (holdRole, string) {
	done := e.rl.GetApplyOnStreamDone()
	ha := e.rl.GetHitsAddend()
	// Outside a RateLimitPerRoute Envoy sends no hits_addend: each hit
	// costs 1.
	honoured := e.perRoute && ha != nil
	peek := honoured && ha.GetFormat() == "" && ha.GetNumber().GetValue() == 0
	refund := honoured && ha.GetIsNegativeHits()
	addID := fmt.Sprintf("add request_headers {header_name: x-request-id, descriptor_key: %s}", h.ID)
	switch {
	case settle != nil && !done:
		return misheld, fmt.Sprintf("a settle (entry %q) on the request path ends the call's hold before the call is served, and charges its hits_addend as the actual cost: set apply_on_stream_done: true", h.Settle)
	case settle != nil && id == nil:
		return misheld, fmt.Sprintf("a settle (entry %q) without the id entry %q ends no hold: envoy-rls charges it as a plain hit after the response; %s", h.Settle, h.ID, addID)
	case id != nil && id.val.kind == known:
		return misheld, fmt.Sprintf("the id entry %q has the one value %s on every call: each reserve after the first is taken as a retry of it and charged nothing; take it from x-request-id (request_headers)", h.ID, id.val)
	case settle != nil && ha != nil && !e.perRoute:
		return settles, "hits_addend is honoured only in a RateLimitPerRoute's rate_limits (typed_per_filter_config): here the settle charges 1 as the call's actual cost"
	case settle != nil:
		return settles, ""
	case id == nil || peek || refund:
		return notHeld, ""
	case done:
		return misheld, fmt.Sprintf("an id entry %q on stream done without the settle entry %q reserves after the call has ended, and nothing settles it: add generic_key {descriptor_key: %s, descriptor_value: \"true\"}", h.ID, h.Settle, h.Settle)
	}
	return reserves, ""
}

// holdEntry records the limits entry e reaches (m, in tree t) as reserved
// or settled on e's route.
func (ck *checker) holdEntry(e *entry, t *tree, m *matchResult, role holdRole) {
	if role != reserves && role != settles {
		return
	}
	nodes := append([]*lnode(nil), m.limited...)
	for _, r := range m.restricted {
		nodes = append(nodes, r.node)
	}
	for _, n := range nodes {
		if ck.holds.ways == nil {
			ck.holds.ways = make(map[slotUse]*holdWays)
		}
		u := slotUse{e.route, n}
		w := ck.holds.ways[u]
		if w == nil {
			w = &holdWays{domain: e.domain, path: n.Path, file: t.domain.File, line: n.Descriptor.Line,
				lease: t.domain.Holds.Lease.String(), concurrency: concurrencyRule(n) != nil}
			ck.holds.ways[u] = w
			ck.holds.order = append(ck.holds.order, u)
		}
		if role == settles {
			w.settle = e.where
		} else {
			w.reserve = e.where
		}
	}
}

// unsettled reports the routes that reserve a limit and never settle it,
// in the order the entries came, then the holds domains no route sends
// an id to.
func (ck *checker) unsettled() {
	for _, u := range ck.holds.order {
		w := ck.holds.ways[u]
		if w.reserve == "" || w.settle != "" {
			continue
		}
		what := "its cost"
		if w.concurrency {
			what = "its slots"
		}
		ck.add(Finding{Kind: Holds, Route: w.reserve, Limit: w.domain + "." + w.path,
			Message: fmt.Sprintf("reserves the limit (%s:%d) under the call's id and never settles it: each call holds %s for the whole lease (%s); add the same actions with the settle entry, apply_on_stream_done: true and the actual cost as hits_addend", w.file, w.line, what, w.lease)})
	}
	for _, name := range ck.domainNames {
		h := ck.trees[name].domain.Holds
		if h == nil || !ck.usedDomain[name] || ck.holds.idSent[name] || ck.holds.policyOnly[name] || ck.allIncomplete || ck.incomplete[name] {
			continue
		}
		ck.add(Finding{Kind: Holds, Limit: name,
			Message: fmt.Sprintf("declares holds (%s:%d) but no route sends the id entry %q: nothing is reserved, and a settle is a plain charge after the response; add request_headers {header_name: x-request-id, descriptor_key: %s} to the reserve and the settle",
				ck.trees[name].domain.File, h.Line, h.ID, h.ID)})
	}
}
