package lint

import (
	"fmt"
	"sort"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// quotaFilter is one envoy.filters.http.rate_limit_quota of an HTTP
// connection manager: the domain its reports carry and the buckets its
// matchers build. Unlike the rate limit filter's descriptors, a bucket id
// does not depend on the route, so the routes are not read.
type quotaFilter struct {
	listener, name, domain string
	buckets                []quotaBucket
}

func (q *quotaFilter) where() string {
	return fmt.Sprintf("listener %q filter %q", q.listener, q.name)
}

// quotaBucket is one bucket id the matchers build: an action of the
// matcher tree, its entries (a literal is known, a request header any
// value), or why they cannot be derived.
type quotaBucket struct {
	where   string
	items   []item
	problem string
}

// bucketString renders a bucket id as {key="value", key=*}, keys sorted.
func bucketString(items []item) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// quotaFilterOf returns hf as a quota filter, or nil if it is not one.
func quotaFilterOf(listener string, hf *hcmv3.HttpFilter) *quotaFilter {
	c := new(rlqsv3.RateLimitQuotaFilterConfig)
	if a := hf.GetTypedConfig(); a == nil || !a.MessageIs(c) || a.UnmarshalTo(c) != nil {
		return nil
	}
	q := &quotaFilter{listener: listener, name: hf.GetName(), domain: c.GetDomain()}
	q.matcher(c.GetBucketMatchers(), "bucket_matchers")
	return q
}

// matcher adds the buckets of every action m can reach.
func (q *quotaFilter) matcher(m *xdsmatcherv3.Matcher, path string) {
	if m == nil {
		return
	}
	for i, fm := range m.GetMatcherList().GetMatchers() {
		q.onMatch(fm.GetOnMatch(), fmt.Sprintf("%s.matcher_list.matchers[%d]", path, i))
	}
	if t := m.GetMatcherTree(); t != nil {
		if t.GetCustomMatch() != nil {
			q.buckets = append(q.buckets, quotaBucket{where: path + ".matcher_tree",
				problem: "a custom_match tree cannot be walked"})
		}
		for kind, mm := range map[string]*xdsmatcherv3.Matcher_MatcherTree_MatchMap{
			"exact_match_map": t.GetExactMatchMap(), "prefix_match_map": t.GetPrefixMatchMap()} {
			keys := make([]string, 0, len(mm.GetMap()))
			for k := range mm.GetMap() {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				q.onMatch(mm.GetMap()[k], fmt.Sprintf("%s.matcher_tree.%s[%q]", path, kind, k))
			}
		}
	}
	q.onMatch(m.GetOnNoMatch(), path+".on_no_match")
}

func (q *quotaFilter) onMatch(om *xdsmatcherv3.Matcher_OnMatch, path string) {
	switch {
	case om.GetMatcher() != nil:
		q.matcher(om.GetMatcher(), path)
	case om.GetAction() != nil:
		q.buckets = append(q.buckets, bucketOf(om.GetAction(), path))
	}
}

// bucketOf derives the bucket id an action's settings build.
func bucketOf(a *xdscorev3.TypedExtensionConfig, path string) quotaBucket {
	b := quotaBucket{where: path}
	if a.GetName() != "" {
		b.where = fmt.Sprintf("bucket %q", a.GetName())
	}
	s := new(rlqsv3.RateLimitQuotaBucketSettings)
	if err := a.GetTypedConfig().UnmarshalTo(s); err != nil {
		b.problem = fmt.Sprintf("the action is not a RateLimitQuotaBucketSettings: %v", err)
		return b
	}
	builder := s.GetBucketIdBuilder().GetBucketIdBuilder()
	keys := make([]string, 0, len(builder))
	for k := range builder {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vb := builder[k]
		if cv := vb.GetCustomValue(); cv != nil {
			if _, ok := headerInput(cv.GetTypedConfig()); !ok {
				b.problem = fmt.Sprintf("bucket_id_builder[%q]: the custom_value %s cannot be derived", k, cv.GetTypedConfig().GetTypeUrl())
				return b
			}
			b.items = append(b.items, item{k, value{kind: anyValue}})
			continue
		}
		b.items = append(b.items, item{k, value{kind: known, s: vb.GetStringValue()}})
	}
	return b
}

// headerInput is the request header a custom value reads, if it reads one.
func headerInput(a *anypb.Any) (string, bool) {
	h := new(matcherv3.HttpRequestHeaderMatchInput)
	if a == nil || !a.MessageIs(h) || a.UnmarshalTo(h) != nil {
		return "", false
	}
	return h.GetHeaderName(), true
}

// quota checks every bucket one quota filter builds.
func (ck *checker) quota(q *quotaFilter) {
	ck.usedDomain[q.domain] = true
	t := ck.trees[q.domain]
	if t == nil {
		ck.add(Finding{Kind: DomainMismatch, Route: q.where(), Limit: q.domain,
			Message: fmt.Sprintf("the filter's domain %q is not in the limits (%s)", q.domain, ck.domainList())})
		return
	}
	for _, b := range q.buckets {
		where := q.where() + " " + b.where
		if b.problem != "" {
			ck.incomplete[q.domain] = true
			ck.add(Finding{Kind: Unchecked, Route: where, Limit: q.domain,
				Message: b.problem + "; unreachable limits of this domain are not reported"})
			continue
		}
		m := t.matchBucket(b.items)
		for _, n := range m.limited {
			ck.reached[n] = true
			ck.quotaConcurrency(where, q.domain, t, n)
		}
		for _, r := range m.restricted {
			ck.reached[r.node] = true
		}
		if m.full {
			continue
		}
		id := bucketString(b.items)
		var msg string
		switch {
		case len(b.items) == 0:
			msg = "bucket id {} is empty: it can match no limit"
		case len(m.restricted) > 0:
			msg = fmt.Sprintf("bucket id %s matches a limit only for values %s", id, strings.Join(m.alternatives(), ", "))
		case m.noLimits != nil:
			msg = fmt.Sprintf("bucket id %s matches no limit: it ends at %s.%s, which has no rate_limit", id, q.domain, m.noLimits.Path)
		default:
			msg = fmt.Sprintf("bucket id %s matches no limit: %s", id, m.bucketWhy(q.domain))
		}
		ck.add(Finding{Kind: Unmatched, Route: where, Limit: q.domain, Message: msg})
	}
}

// matchBucket walks a bucket id down the tree as envoy-rls matches one
// (descriptors.Index.MatchSet): a bucket id's entries have no order, so
// the walker backs out of a way that leads nowhere and takes the next; an
// unknown value may or may not equal an exact value (or match a wildcard):
// both ways are walked. Items come sorted by key, as the walker wants a
// set's.
func (t *tree) matchBucket(items []item) *matchResult {
	return t.walk(items, false)
}

// bucketWhy says where the deepest walk of a bucket id stopped.
func (m *matchResult) bucketWhy(domain string) string {
	keys := make([]string, len(m.left))
	for i, it := range m.left {
		keys[i] = it.String()
	}
	left := strings.Join(keys, ", ")
	if m.stopped == nil {
		return fmt.Sprintf("no top-level descriptor of domain %s takes any of %s", domain, left)
	}
	return fmt.Sprintf("no descriptor under %s.%s takes any of %s", domain, m.stopped.Path, left)
}
