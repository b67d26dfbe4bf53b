package rls

import (
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A plan is what the service does with one request, worked out once from
// the request and the config in force: for each descriptor, the limits that
// apply, the store hits that decide them and the flags that say how their
// outcome is answered. ShouldRateLimit carries a plan out (one store call,
// one failure pass, one answer); Explain builds the same plan for a single
// descriptor at cost 0 and reads the state it finds, so the two cannot
// disagree. The answer, its headers, the metrics and the logs all read the
// plan and its verdicts, never the protobuf they produce.
//
// Plans are pooled: the slices are reused across requests, so that
// building one allocates only the store keys. Nothing in a plan outlives
// its request, and the store keeps neither hits nor results after Decide.
type plan struct {
	domain string
	// known reports whether the domain is configured; an unknown domain's
	// descriptors are all answered OK without a limit.
	known bool
	// holds is the domain's holds, nil when it declares none (holds.go).
	holds *config.Holds
	descs []planned
	// hits holds every descriptor's hits, in request order, for the one
	// store call; results[i] answers hits[i]. Each planned descriptor's
	// hits and results are windows onto these.
	hits    []limits.Hit
	results []limits.Result
	// replacedBy maps the name of each limit that a matched limit's
	// `replaces` drops to the name of the limit that drops it. Replacing
	// is per request: a limit of one descriptor drops a limit of another.
	replacedBy map[string]string
	// warns reports that a limit of the plan has warn_at (warn.go): off,
	// the answer carries no warning and no crossing is counted.
	warns bool
	// tried are the candidates of the plan's limits (candidate.go), each
	// decided by one hit after every descriptor's; triedHits and
	// triedResults, windows onto hits and results, are theirs. Empty for
	// a plan whose limits have none.
	tried        []tried
	triedHits    []limits.Hit
	triedResults []limits.Result
	// now is the instant the plan is settled at (Options.Now): what its
	// answer reports of a window whose length varies is that window's.
	now time.Time

	// entries and path are storage for the descriptors' entries and walks.
	entries []descriptors.Entry
	path    []*descriptors.Node
}

// planned is the plan for one descriptor of the request.
type planned struct {
	// entries are the descriptor's entries as the request sent them.
	entries []descriptors.Entry
	// path holds the node the walk matched at each level: as long as
	// entries when the walk ended on the last entry, shorter when it
	// stopped early.
	path []*descriptors.Node
	// node is where the walk ended on the last entry; nil when it did not.
	node *descriptors.Node
	// rules are the limits that decide the descriptor, all of which must
	// allow: the node's (one from rate_limit, several from rate_limits),
	// or Envoy's override. Limits another one replaces are not among them.
	// Empty: no limit applies, the descriptor is answered OK.
	rules []*config.Rule
	// unlimited is set for a node whose limit is `unlimited: true`: it is
	// answered OK and never touches the store.
	unlimited bool
	// cost is c of docs/semantics.md.
	cost int64
	// hold is what the descriptor's entries of the domain's holds say,
	// carried by each of its hits; the zero Hold outside a holds domain.
	hold limits.Hold
	// shadow and quota are the node's shadow_mode (or the service's) and
	// quota_mode: how a refusal is answered.
	shadow, quota bool
	// hits[j] decides rules[j] and results[j] is the store's answer.
	hits    []limits.Hit
	results []limits.Result
	// sameAs is the earlier descriptor of the request that counts on the
	// same counters and carries this one's cost too (finish); its verdict
	// is this one's. This descriptor then has no hits of its own.
	sameAs *planned
	// failure is set by the failure pass when the store could not decide
	// the descriptor and its failure mode answers instead.
	failure *storeFailure
	// verdict is the outcome, filled in by settle.
	verdict verdict
}

// storeFailure is why the store did not decide a descriptor, and the
// failure mode that answers for it.
type storeFailure struct {
	err  error
	mode config.FailureMode
	// rule is the limit whose failure mode it is: the strictest of the
	// descriptor's.
	rule *config.Rule
}

// decided reports whether the descriptor goes to the store.
func (d *planned) decided() bool { return !d.unlimited && len(d.rules) > 0 }

var planPool = sync.Pool{New: func() any { return new(plan) }}

// maxPooled bounds the slices a pooled plan keeps (in elements), so that one
// huge request does not pin its memory.
const maxPooled = 4 * MaxDescriptors

// newPlan returns an empty plan for domain from the pool.
func newPlan(ix *descriptors.Index, domain string, n int) *plan {
	p := planPool.Get().(*plan)
	p.domain = domain
	p.known = ix.Known(domain)
	p.warns = false
	p.holds = nil
	if p.known {
		p.holds = ix.Config().Holds(domain)
	}
	if cap(p.descs) < n {
		p.descs = make([]planned, 0, n)
	}
	p.descs = p.descs[:0]
	p.hits, p.results = p.hits[:0], p.results[:0]
	p.tried, p.triedHits, p.triedResults = p.tried[:0], nil, nil
	p.entries, p.path = p.entries[:0], p.path[:0]
	return p
}

// release drops what the plan points to (keys, rules, config nodes, errors)
// and returns it to the pool.
func (p *plan) release() {
	clear(p.descs[:cap(p.descs)])
	clear(p.hits[:cap(p.hits)])
	clear(p.results[:cap(p.results)])
	clear(p.entries[:cap(p.entries)])
	clear(p.path[:cap(p.path)])
	clear(p.replacedBy)
	clear(p.tried[:cap(p.tried)])
	p.triedHits, p.triedResults = nil, nil
	if cap(p.descs) > maxPooled || cap(p.hits) > maxPooled || cap(p.results) > maxPooled ||
		cap(p.entries) > maxPooled || cap(p.path) > maxPooled || len(p.replacedBy) > maxPooled {
		return
	}
	planPool.Put(p)
}

// descriptorInput is one descriptor as the planner takes it, whatever
// asked: a request of Envoy's, or an explanation.
type descriptorInput struct {
	entries []descriptors.Entry
	// override is Envoy's descriptor limit override; nil for none.
	override *ratelimitv3.RateLimitDescriptor_RateLimitOverride
	cost     int64
	hold     limits.Hold
}

// add plans one descriptor: its walk of the config tree and the limits that
// apply. Its error is the request's fault (an override no limit can take).
func (p *plan) add(s *Service, ix *descriptors.Index, in descriptorInput) error {
	p.descs = append(p.descs, planned{entries: in.entries, cost: in.cost, hold: in.hold})
	d := &p.descs[len(p.descs)-1]
	if !p.known {
		return nil
	}
	// Every descriptor's walk stays in p.path, one after another: a later
	// append may move the array, but a window taken before still reads the
	// same nodes.
	lo := len(p.path)
	node, _, path := ix.Match(p.domain, in.entries, p.path)
	p.path = path
	d.path, d.node = path[lo:len(path):len(path)], node
	if node != nil {
		d.rules = node.Descriptor.Rules
		d.shadow = node.Descriptor.ShadowMode
		d.quota = node.Descriptor.QuotaMode
	}
	d.shadow = d.shadow || s.statusShadow
	d.quota = d.quota || s.quotaMode
	if in.override != nil {
		var matched *config.Rule
		if len(d.rules) > 0 {
			matched = d.rules[0]
		}
		r, err := overrideRule(matched, in.override)
		if err != nil {
			return err
		}
		d.rules = []*config.Rule{r}
	}
	d.unlimited = len(d.rules) == 1 && d.rules[0].Unlimited
	d.quota = d.quota && !d.unlimited
	for _, r := range d.rules {
		p.warns = p.warns || len(r.WarnAt) > 0
		for _, name := range r.Replaces {
			if p.replacedBy == nil {
				p.replacedBy = make(map[string]string)
			}
			if _, ok := p.replacedBy[name]; !ok {
				p.replacedBy[name] = r.Name
			}
		}
	}
	return nil
}

// finish drops replaced limits and lays out the store hits of every
// descriptor, each limit's key named as the file names it. maxDelay bounds a
// leaky bucket's wait.
//
// Descriptors of one request that count on the same counters (the same
// descriptor listed twice, or values that share_threshold puts under one
// counter) are decided as the profile's Listings say: together, as one set
// of hits whose cost is theirs added up (only consuming descriptors are
// merged; a peek or a refund is decided on its own), or each on its own,
// in order.
func (p *plan) finish(s *Service, maxDelay time.Duration) {
	n, tried := 0, 0
	for i := range p.descs {
		d := &p.descs[i]
		if len(p.replacedBy) > 0 {
			d.rules = p.withoutReplaced(d.rules)
		}
		if d.decided() {
			n += len(d.rules)
			tried += candidates(d.rules)
		}
	}
	n += tried
	// Room for every hit up front, so that the windows taken below stay on
	// the same array.
	if cap(p.hits) < n {
		p.hits = make([]limits.Hit, 0, n)
	}
	if cap(p.results) < n {
		p.results = make([]limits.Result, n)
	}
	p.results = p.results[:n]
	clear(p.results)
	for i := range p.descs {
		d := &p.descs[i]
		if !d.decided() {
			continue
		}
		// Counter keys name what the walk matched: a share_threshold
		// wildcard shares one counter among all the values it matches.
		keyEntries := sharedEntries(d.entries, d.path)
		lo := len(p.hits)
		for j, r := range d.rules {
			key, tag := s.storeKey(p.domain, keyEntries, r.Limit, listIndex(d, r, j))
			p.hits = append(p.hits, limits.Hit{
				Key:      key,
				Tag:      tag,
				Limit:    r.Limit,
				Cost:     d.cost,
				MaxDelay: maxDelay,
				Joint:    j < len(d.rules)-1,
				Hold:     d.hold,
			})
		}
		hi := len(p.hits)
		d.hits, d.results = p.hits[lo:hi:hi], p.results[lo:hi:hi]
		if s.profile.Listings == ListingsTogether {
			p.together(d, i, lo)
		}
	}
	if tried > 0 {
		p.planCandidates(s, maxDelay) // candidate.go
	}
	p.results = p.results[:len(p.hits)]
}

// together merges d, the i-th descriptor, whose hits start at lo, into the
// earlier one that counts on the same counters, if any: that one carries
// both costs, and d has no hits of its own.
func (p *plan) together(d *planned, i, lo int) {
	first := p.sameCounters(d, i)
	if first == nil {
		return
	}
	first.cost = min(first.cost+d.cost, limits.MaxRequests+1)
	for j := range first.hits {
		first.hits[j].Cost = first.cost
	}
	p.hits = p.hits[:lo]
	d.hits, d.results, d.sameAs = nil, nil, first
}

// sameCounters returns the consuming descriptor before the i-th, d, that
// counts on the same counters as d, or nil. Descriptors whose holds differ
// (ids, or a reserve and a settle) are not one: each does its own.
func (p *plan) sameCounters(d *planned, i int) *planned {
	if d.cost <= 0 {
		return nil
	}
	for k := range p.descs[:i] {
		e := &p.descs[k]
		if e.sameAs != nil || e.cost <= 0 || len(e.hits) != len(d.hits) || e.hold != d.hold {
			continue
		}
		same := true
		for j := range e.hits {
			same = same && e.hits[j].Key == d.hits[j].Key
		}
		if same {
			return e
		}
	}
	return nil
}

// withoutReplaced returns rules less those the request's other limits
// replace; rules itself, without copying, when none is.
func (p *plan) withoutReplaced(rules []*config.Rule) []*config.Rule {
	for i, r := range rules {
		if p.replaced(r) {
			kept := append([]*config.Rule(nil), rules[:i]...)
			for _, r := range rules[i+1:] {
				if !p.replaced(r) {
					kept = append(kept, r)
				}
			}
			return kept
		}
	}
	return rules
}

// replaced reports whether another limit of the request replaces r.
func (p *plan) replaced(r *config.Rule) bool {
	if r.Name == "" {
		return false
	}
	_, ok := p.replacedBy[r.Name]
	return ok
}

// storeKey names the counter of limit l, the index-th of its descriptor's
// limits, for entries (after sharedEntries), and its hash tag.
func (s *Service) storeKey(domain string, entries []descriptors.Entry, l limits.Limit, index int) (string, uint64) {
	return descriptors.KeyTag(descriptors.KeyInput{Domain: domain, Entries: entries, Limit: l, Index: index,
		Prefix: s.keyPrefix, HashValues: s.hashValues})
}

// listIndex is r's place in its descriptor's rate_limits list, which its
// key names: the place in the file, not in d.rules, from which replaced
// limits are gone (else a limit would change counters, or share a replaced
// sibling's, with the other descriptors of a request). j, r's place in
// d.rules, for an override.
func listIndex(d *planned, r *config.Rule, j int) int {
	if d.node != nil {
		for i, fr := range d.node.Descriptor.Rules {
			if fr == r {
				return i
			}
		}
	}
	return j
}

// sharedEntries returns entries with the value of every share_threshold
// wildcard level replaced by its pattern. It returns entries itself, without
// copying, when no level shares.
func sharedEntries(entries []descriptors.Entry, path []*descriptors.Node) []descriptors.Entry {
	var out []descriptors.Entry
	for i, n := range path {
		if n.Wildcard && n.Descriptor.ShareThreshold {
			if out == nil {
				out = append([]descriptors.Entry(nil), entries...)
			}
			out[i].Value = n.Descriptor.Value
		}
	}
	if out == nil {
		return entries
	}
	return out
}
