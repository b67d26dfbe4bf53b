package lint

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
)

// A forward-auth policy (package forwardauth) is a domain and Envoy's
// route rate_limits, from which envoy-rls's endpoint builds descriptors as
// Envoy would: lint checks it as one route of a rate limit filter, named
// `forward-auth policy "NAME" rate_limits[I]`. The endpoint knows no route,
// so every value read from the request may be anything: a header or a
// query parameter is sent only when the request has it, the pseudo-headers
// (:path, :method, :authority) always (a call without them is refused
// 400); the actions only Envoy can evaluate never load (forwardauth
// refuses them). Two things differ from Envoy: the endpoint is asked once
// per request and never when the request ends, so a concurrency limit's
// slots and a hold's reservations it takes are never given back; and it
// answers a call whose policy's domain the limits lack 404, which nginx
// and Caddy take as a failure.

// policy checks what one forward-auth policy sends, as filter checks what a
// rate limit filter sends.
func (ck *checker) policy(p *forwardauth.Policy) {
	where := fmt.Sprintf("forward-auth policy %q", p.Name)
	if !ck.usedDomain[p.Domain] { // the filters came first
		if ck.holds.policyOnly == nil {
			ck.holds.policyOnly = make(map[string]bool)
		}
		ck.holds.policyOnly[p.Domain] = true
	}
	ck.usedDomain[p.Domain] = true
	if ck.trees[p.Domain] == nil {
		ck.add(Finding{Kind: DomainMismatch, Route: where, Limit: p.Domain,
			Message: fmt.Sprintf("the policy's domain %q is not in the limits (%s): the endpoint answers its calls 404", p.Domain, ck.domainList())})
		return
	}
	// route stands for the policy in the books kept per route.
	route := &routev3.Route{Name: p.Name}
	reached := make(map[*lnode]bool)
	for i, rl := range p.RateLimits() {
		ck.entry(&entry{where: fmt.Sprintf("%s rate_limits[%d]", where, i), domain: p.Domain,
			rl: rl, route: route, forwardAuth: true}, reached)
	}
}

// forwardAuthHolds returns the entries of shape s that envoy-rls matches
// (all but a holds domain's id and settle), reporting a policy that
// reserves or settles: the endpoint is never called when the request
// ends, so what it reserves is never settled, and a settle is sent before
// the request is served.
func (ck *checker) forwardAuthHolds(e *entry, t *tree, s shape) []item {
	h := t.domain.Holds
	if h == nil {
		return s.items
	}
	items := make([]item, 0, len(s.items))
	var held []string
	for _, it := range s.items {
		if it.key == h.ID || it.key == h.Settle {
			held = append(held, it.key)
			continue
		}
		items = append(items, it)
	}
	if len(held) > 0 {
		ck.add(Finding{Kind: Holds, Route: e.where, Limit: e.domain,
			Message: fmt.Sprintf("domain %q declares holds (%s:%d) and descriptor %s carries its entry %q: forward-auth is asked before the request and never when it ends, so a reservation is never settled (it stays held for the lease, %s) and a settle comes before the request is served; leave the entry out, for a plain hit",
				e.domain, t.domain.File, h.Line, s, held[0], h.Lease)})
	}
	return items
}

// forwardAuthSlots reports the concurrency limits a policy's descriptor
// reaches (m, in tree t): the endpoint takes a slot per request and,
// never called when the request ends, never gives it back.
func (ck *checker) forwardAuthSlots(e *entry, t *tree, m *matchResult) {
	nodes := append([]*lnode(nil), m.limited...)
	for _, r := range m.restricted {
		nodes = append(nodes, r.node)
	}
	for _, n := range nodes {
		rule := concurrencyRule(n)
		if rule == nil {
			continue
		}
		ck.add(Finding{Kind: Concurrency, Route: e.where, Limit: e.domain + "." + n.Path,
			Message: fmt.Sprintf("takes slots of the concurrency limit (%s:%d) and never gives them back: forward-auth is asked before the request and never when it ends, so each slot stays held for the whole lease (%s); limit the policy with a rate instead",
				t.domain.File, rule.Line, rule.Limit.Period)})
	}
}
