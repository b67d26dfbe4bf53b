// Package lint checks an Envoy bootstrap against a limits config: that every
// descriptor Envoy's rate limit filter can send meets a limit, that every
// limit can be met, that the filter and the limits name the same domain,
// that no leaky bucket makes a request wait longer than the filter does,
// that every concurrency limit's slots taken on a route are given back
// there on stream done (concurrency.go), and that a domain with holds gets
// its reservations, with the call's id, settled on stream done (holds.go).
// Forward-auth policies, Envoy's route rate_limits sent by envoy-rls's own
// endpoint, are checked the same way, each as a route (forwardauth.go).
//
// From the bootstrap it takes the static listeners, their HTTP connection
// managers' envoy.filters.http.ratelimit filters (domain, stage, timeout) and
// static route_config, and derives for every route the rate_limits entries
// that apply to it, as Envoy chooses them:
//
//   - a RateLimitPerRoute in the most specific typed_per_filter_config (route,
//     then virtual host, then route configuration) with rate_limits: those;
//   - else the filter's own rate_limits, if any;
//   - else the route's rate_limits of the filter's stage, then the virtual
//     host's: always with include_vh_rate_limits or vh_rate_limits: INCLUDE,
//     never with IGNORE, and with OVERRIDE (the default) only when the route
//     has no rate_limits at all.
//
// A RateLimitPerRoute's domain overrides the filter's. Routes that do not
// forward (redirect, direct_response) and routes that disable the filter are
// not rate limited.
//
// Each entry's actions give a descriptor shape: its keys in order, each with
// a value that is known (generic_key's descriptor_value, header_value_match's,
// the route's cluster for destination_cluster, the node's cluster for
// source_cluster, a request header or query parameter that the route's match
// fixes, :path from an exact path match), known to start with a prefix (:path
// from a prefix match) or any value (remote_address, other headers,
// metadata). An action that cannot append its entry (a header that is
// absent, headers that do not match) stops the whole descriptor, so each
// shape carries the conditions under which Envoy sends it; with
// skip_if_absent, Envoy instead leaves that entry out and sends the rest
// (router_ratelimit.cc), so the entry forks the shape in two. A shape is
// matched against the limits as envoy-rls matches a request: at each level
// the exact value, then the wildcards in file order, then the bare key; an
// unknown value may take each of those, an exact one only for that value.
//
// The rate limit quota filter (envoy.filters.http.rate_limit_quota, RLQS)
// is checked too: every action its bucket_matchers can reach builds a
// bucket id, each entry a literal (string_value, known) or a request
// header (custom_value with HttpRequestHeaderMatchInput, any value); other
// custom values are reported as unchecked. A bucket id is matched as
// envoy-rls matches one: its entries have no order, so each level of the
// domain's tree consumes an entry left whose child matches (an exact
// value, then a wildcard, then a bare key, ties in key order), backing up
// from a way that leads nowhere, and the id matches the limit of the first
// way that consumes every entry. Matcher predicates
// are not read: a header value is taken as any value even where a
// predicate fixes it.
//
// Limitations: routes from RDS, scoped routes, VHDS, listeners from LDS and
// filters from ECDS are reported as unchecked (and the reachability of the
// limits of their domains is not judged); extension actions other than
// envoy.rate_limit_descriptors.expr and matcher inputs are unchecked; the
// typed_config of an extension this build does not link in is not read
// (ParseBootstrap); request_type, disable_key and runtime fractions are
// ignored (every entry is taken as enabled); a formatter in a
// descriptor_value (%REQ(...)%, enabled by a runtime flag) is taken
// literally; an exact path match is taken as :path although a request's
// :path also carries its query string.
package lint

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Kind names what a Finding is about.
type Kind string

// The kinds of findings.
const (
	// Unmatched: a descriptor that Envoy sends meets no limit (or meets one
	// only for some values of a key whose value can be anything), so it is
	// never limited.
	Unmatched Kind = "unmatched"
	// Unreachable: no descriptor that Envoy sends can meet the limit, or no
	// filter uses the limit's domain at all.
	Unreachable Kind = "unreachable"
	// DomainMismatch: a filter (or a per-route config) names a domain that
	// the limits do not define.
	DomainMismatch Kind = "domain"
	// LeakyTimeout: a leaky bucket may delay a request longer than the
	// filter's timeout.
	LeakyTimeout Kind = "leaky-timeout"
	// Unchecked: part of the Envoy config cannot be checked (RDS, LDS,
	// ECDS, an extension action).
	Unchecked Kind = "unchecked"
	// Concurrency: a concurrency limit's slots are taken without being
	// given back on stream done, or given back where Envoy does not, or
	// reached by RLQS, which does not enforce it (concurrency.go).
	Concurrency Kind = "concurrency"
	// Holds: a domain's holds are sent so that a call's reservation is
	// never settled, is settled before the call is served, or is made
	// without the call's id (holds.go).
	Holds Kind = "holds"
)

// DefaultFilterTimeout is the timeout of Envoy's rate limit filter when its
// config sets none.
const DefaultFilterTimeout = 20 * time.Millisecond

// Finding is one problem lint found.
type Finding struct {
	Kind Kind
	// Route names the Envoy side: a rate_limits entry (`vhost "api" route
	// "login" rate_limits[0]`), a filter (`listener "ingress" filter
	// "envoy.filters.http.ratelimit"`), a listener, or a forward-auth
	// policy (`forward-auth policy "edge" rate_limits[0]`); empty when the
	// finding is about the limits alone.
	Route string
	// Limit names the limits side: a domain (`edge`), or a limit by domain
	// and config path (`edge.path_/login.remote_address`); empty when the
	// finding is about Envoy alone.
	Limit string
	// Message says what is wrong.
	Message string
}

// String renders the finding on one line: "KIND: ROUTE: LIMIT: MESSAGE",
// leaving out an empty Route or Limit.
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	for _, s := range []string{f.Route, f.Limit, f.Message} {
		if s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// Lint reads the Envoy bootstrap at envoyPath (YAML or JSON) and the limits
// at limitsPath (a file or a directory, loaded with o as the server loads
// them) and checks one against the other. An error means a file could not be
// read or parsed; findings are problems of the configs themselves.
func Lint(envoyPath, limitsPath string, o config.Options) ([]Finding, error) {
	data, err := os.ReadFile(envoyPath)
	if err != nil {
		return nil, err
	}
	b, err := ParseBootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envoyPath, err)
	}
	c, err := o.Load(limitsPath)
	if err != nil {
		return nil, err
	}
	return Check(b, c), nil
}

// Check compares the bootstrap b with the limits c. The findings come in a
// stable order: Envoy's side in config order (unchecked parts, domains,
// descriptors, leaky buckets, per filter), then the limits no descriptor
// reaches, in domain name and file order. Identical findings are reported
// once.
func Check(b *bootstrapv3.Bootstrap, c *config.Config) []Finding {
	return CheckPolicies(b, nil, c)
}

// CheckPolicies is Check with the forward-auth policies of fa as senders
// too, after the bootstrap's filters (forwardauth.go): a limit either one
// reaches is reached. b or fa may be nil, for policies or a bootstrap
// alone.
func CheckPolicies(b *bootstrapv3.Bootstrap, fa *forwardauth.Config, c *config.Config) []Finding {
	ck := &checker{
		trees:      make(map[string]*tree, len(c.Domains)),
		reached:    make(map[*lnode]bool),
		usedDomain: make(map[string]bool),
		incomplete: make(map[string]bool),
		seen:       make(map[string]bool),
	}
	for name, d := range c.Domains {
		ck.trees[name] = newTree(d)
	}
	ck.domainNames = make([]string, 0, len(c.Domains))
	for name := range c.Domains {
		ck.domainNames = append(ck.domainNames, name)
	}
	sort.Strings(ck.domainNames)

	env := extract(b)
	for _, u := range env.unchecked {
		ck.add(Finding{Kind: Unchecked, Route: u.where, Message: u.msg + "; unreachable limits are not reported"})
		ck.allIncomplete = true
	}
	for _, f := range env.filters {
		ck.filter(env, f)
	}
	for _, q := range env.quotas {
		ck.quota(q)
	}
	for _, p := range fa.Policies() {
		ck.policy(p)
	}
	ck.unreleased()
	ck.unsettled()
	ck.unreachable()
	return ck.findings
}

type checker struct {
	trees       map[string]*tree
	domainNames []string
	// reached holds the limits some descriptor reaches.
	reached map[*lnode]bool
	// usedDomain holds the domains some filter sends to.
	usedDomain map[string]bool
	// incomplete holds the domains some unchecked part of Envoy's config
	// may send to: their unreachable limits are not reported.
	incomplete    map[string]bool
	allIncomplete bool
	findings      []Finding
	seen          map[string]bool

	// slots holds, per route and concurrency limit, whether it takes and
	// gives back slots (concurrency.go).
	slots slotBook
	// holds holds, per route and limit of a holds domain, whether it
	// reserves and settles (holds.go).
	holds holdBook
}

func (ck *checker) add(f Finding) {
	s := f.String()
	if ck.seen[s] {
		return
	}
	ck.seen[s] = true
	ck.findings = append(ck.findings, f)
}

// filter checks everything one rate limit filter sends.
func (ck *checker) filter(env *envoyConfig, f *filter) {
	where := f.where()
	ck.usedDomain[f.domain] = true
	if f.unchecked != "" {
		ck.incomplete[f.domain] = true
		ck.add(Finding{Kind: Unchecked, Route: where, Message: fmt.Sprintf("%s; unreachable limits of domain %q are not reported", f.unchecked, f.domain)})
	}
	if ck.trees[f.domain] == nil {
		ck.add(Finding{Kind: DomainMismatch, Route: where, Limit: f.domain,
			Message: fmt.Sprintf("the filter's domain %q is not in the limits (%s)", f.domain, ck.domainList())})
	}
	reached := make(map[*lnode]bool)
	domains := []string{f.domain}
	for _, e := range env.entriesFor(f) {
		if !slices.Contains(domains, e.domain) {
			domains = append(domains, e.domain)
		}
		ck.usedDomain[e.domain] = true
		if ck.trees[e.domain] == nil {
			if e.domain != f.domain {
				ck.add(Finding{Kind: DomainMismatch, Route: e.domainWhere, Limit: e.domain,
					Message: fmt.Sprintf("the per-route domain %q is not in the limits (%s)", e.domain, ck.domainList())})
			}
			continue
		}
		ck.entry(e, reached)
	}
	ck.leaky(f, domains, reached)
}

// entry checks one rate_limits entry as it applies to one route.
func (ck *checker) entry(e *entry, reached map[*lnode]bool) {
	t := ck.trees[e.domain]
	shapes, problem := e.shapes()
	if problem != "" {
		ck.incomplete[e.domain] = true
		ck.add(Finding{Kind: Unchecked, Route: e.where, Limit: e.domain,
			Message: problem + "; unreachable limits of this domain are not reported"})
		return
	}
	for _, sent := range shapes {
		s, m := ck.matchShape(e, t, sent, reached)
		if m.full || s.override {
			continue
		}
		var msg string
		switch {
		case len(s.items) == 0:
			msg = "descriptor () is empty: envoy-rls refuses a request that holds one (InvalidArgument), so Envoy's failure mode decides it"
		case len(m.restricted) > 0:
			msg = fmt.Sprintf("descriptor %s matches a limit only for values %s", s, strings.Join(m.alternatives(), ", "))
		default:
			msg = fmt.Sprintf("descriptor %s matches no limit: %s", s, m.why(e.domain, s.items))
		}
		if len(s.when) > 0 {
			msg += "; " + e.sender() + " sends it only when " + strings.Join(s.when, " and ")
		}
		ck.add(Finding{Kind: Unmatched, Route: e.where, Limit: e.domain, Message: msg})
	}
}

// matchShape matches the shape e sends in tree t, records the limits it
// reaches (in reached too) and how it takes and gives back slots and
// holds, and returns the shape as envoy-rls matches it (a holds domain's
// id and settle entries taken out) with its match.
func (ck *checker) matchShape(e *entry, t *tree, sent shape, reached map[*lnode]bool) (shape, *matchResult) {
	s := sent
	var role holdRole
	if e.forwardAuth {
		s.items = ck.forwardAuthHolds(e, t, sent)
	} else {
		s.items, role = ck.holdShape(e, t, sent)
	}
	m := t.match(s.items)
	for _, n := range m.limited {
		ck.reached[n] = true
		reached[n] = true
	}
	for _, r := range m.restricted {
		ck.reached[r.node] = true
		reached[r.node] = true
	}
	switch {
	case e.forwardAuth:
		ck.forwardAuthSlots(e, t, m)
	case role == notHeld:
		ck.slotEntry(e, t, m)
	default:
		ck.holdEntry(e, t, m, role)
	}
	return s, m
}

// leaky reports the leaky buckets, among the limits the filter's
// descriptors reach, that may delay a request longer than its timeout. A
// filter with unchecked parts is checked against every leaky bucket of its
// domains.
func (ck *checker) leaky(f *filter, domains []string, reached map[*lnode]bool) {
	timeout, set := f.timeout, f.timeoutSet
	if set && timeout == 0 {
		return // no timeout
	}
	if !set {
		timeout = DefaultFilterTimeout
	}
	for _, d := range domains {
		t := ck.trees[d]
		if t == nil {
			continue
		}
		for _, n := range t.limits {
			if !reached[n] && f.unchecked == "" && !ck.allIncomplete && !ck.incomplete[d] {
				continue
			}
			for _, r := range n.Descriptor.Rules {
				if r.Unlimited || r.Limit.Algorithm != limits.LeakyBucket {
					continue
				}
				w := r.Limit.MaxWait()
				if w <= timeout {
					continue
				}
				name := "leaky_bucket"
				if r.Name != "" {
					name = fmt.Sprintf("leaky_bucket %q", r.Name)
				}
				limit := fmt.Sprintf("timeout %s", timeout)
				if !set {
					limit = fmt.Sprintf("default timeout %s (it sets none)", timeout)
				}
				ck.add(Finding{Kind: LeakyTimeout, Route: f.where(), Limit: d + "." + n.Path,
					Message: fmt.Sprintf("%s (%s:%d) may delay a request %s, longer than the filter's %s: a request whose turn is further away is refused instead of delayed; set the filter's timeout above %s",
						name, t.domain.File, r.Line, w, limit, w)})
			}
		}
	}
}

// unreachable reports the limits no descriptor reaches.
func (ck *checker) unreachable() {
	for _, name := range ck.domainNames {
		t := ck.trees[name]
		if ck.allIncomplete || ck.incomplete[name] || len(t.limits) == 0 {
			continue
		}
		if !ck.usedDomain[name] {
			ck.add(Finding{Kind: Unreachable, Limit: name,
				Message: fmt.Sprintf("no rate limit filter uses domain %q: its %s never be reached", name, plural(t.domain.Count().Limits, "limit can", "limits can"))})
			continue
		}
		for _, n := range t.limits {
			if ck.reached[n] {
				continue
			}
			ck.add(Finding{Kind: Unreachable, Limit: name + "." + n.Path,
				Message: fmt.Sprintf("no route sends a descriptor that reaches this limit (%s:%d)", t.domain.File, n.Descriptor.Line)})
		}
	}
}

func (ck *checker) domainList() string {
	if len(ck.domainNames) == 0 {
		return "no domains"
	}
	return "domains: " + strings.Join(ck.domainNames, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
