package lint

import (
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	exprv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/rate_limit_descriptors/expr/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"

	"github.com/envoy-rls/envoy-rls/internal/forwardauth"
)

// valueKind is what lint knows of a descriptor entry's value.
type valueKind uint8

const (
	known    valueKind = iota // exactly value.s
	prefixed                  // some value starting with value.s
	anyValue                  // any value
)

type value struct {
	kind valueKind
	s    string
}

func (v value) String() string {
	switch v.kind {
	case known:
		return strconv.Quote(v.s)
	case prefixed:
		return strconv.Quote(v.s) + "*"
	}
	return "*"
}

// item is one entry of a descriptor shape.
type item struct {
	key string
	val value
}

func (it item) String() string { return it.key + "=" + it.val.String() }

// shape is a descriptor a rate_limits entry sends: its entries in order,
// the conditions under which Envoy sends it at all, and whether it carries a
// limit override (which envoy-rls applies even where no limit matches).
type shape struct {
	items    []item
	when     []string
	override bool
}

// String renders the shape as (key="value", key=*, path="/api/"*).
func (s shape) String() string {
	parts := make([]string, len(s.items))
	for i, it := range s.items {
		parts[i] = it.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// maxShapes bounds the descriptors one entry may stand for (weighted
// clusters and optional entries multiply them).
const maxShapes = 64

// shapes derives the descriptors e can send; problem says why they cannot be
// derived.
func (e *entry) shapes() (_ []shape, problem string) {
	shapes := []shape{{override: e.rl.GetLimit() != nil}}
	for i, a := range e.rl.GetActions() {
		p := e.action(a)
		if p.problem != "" {
			return nil, fmt.Sprintf("actions[%d]: %s", i, p.problem)
		}
		next := make([]shape, 0, len(shapes)*(len(p.vals)+1))
		for _, s := range shapes {
			for _, v := range p.vals {
				next = append(next, s.with(&item{p.key, v}, p.when))
			}
			if p.skip != "" {
				next = append(next, s.with(nil, p.skip))
			}
		}
		if len(next) > maxShapes {
			return nil, fmt.Sprintf("more than %d descriptors to check", maxShapes)
		}
		shapes = next
	}
	return shapes, ""
}

// with is s followed by it (if not nil), sent under condition when (if
// not empty).
func (s shape) with(it *item, when string) shape {
	n := s
	if it != nil {
		n.items = append(s.items[:len(s.items):len(s.items)], *it)
	}
	if when != "" {
		n.when = append(s.when[:len(s.when):len(s.when)], when)
	}
	return n
}

var anyOnly = []value{{kind: anyValue}}

// produced is what one action contributes to a descriptor, as Envoy's
// router_ratelimit.cc builds it.
type produced struct {
	// key and vals are the entry's key and the values it may take.
	key  string
	vals []value
	// when is the condition for the entry; unless skip is set, Envoy
	// sends no descriptor at all for the rate_limits entry when it fails.
	when string
	// skip, when set, is the condition under which the action appends
	// nothing and the descriptor goes on without the entry
	// (skip_if_absent).
	skip    string
	problem string
}

// action returns what an action appends to the descriptor.
func (e *entry) action(a *routev3.RateLimit_Action) produced {
	switch {
	case a.GetSourceCluster() != nil:
		if e.nodeCluster != "" {
			return produced{key: "source_cluster", vals: []value{{known, e.nodeCluster}}}
		}
		return produced{key: "source_cluster", vals: anyOnly}
	case a.GetDestinationCluster() != nil:
		return produced{key: "destination_cluster", vals: clusters(e.route.GetRoute())}
	case a.GetRequestHeaders() != nil:
		rh := a.GetRequestHeaders()
		v, present := headerValue(e.route.GetMatch(), rh.GetHeaderName())
		return fromRequest(rh.GetDescriptorKey(), v, present, rh.GetSkipIfAbsent(), fmt.Sprintf("header %q", rh.GetHeaderName()))
	case a.GetQueryParameters() != nil:
		qp := a.GetQueryParameters()
		v, present := queryValue(e.route.GetMatch(), qp.GetQueryParameterName())
		return fromRequest(qp.GetDescriptorKey(), v, present, qp.GetSkipIfAbsent(), fmt.Sprintf("query parameter %q", qp.GetQueryParameterName()))
	case a.GetRemoteAddress() != nil:
		return produced{key: "remote_address", vals: anyOnly}
	case a.GetMaskedRemoteAddress() != nil:
		return produced{key: "masked_remote_address", vals: anyOnly}
	case a.GetGenericKey() != nil:
		g := a.GetGenericKey()
		return produced{key: or(g.GetDescriptorKey(), forwardauth.DefaultGenericKey), vals: []value{{known, g.GetDescriptorValue()}}}
	case a.GetHeaderValueMatch() != nil:
		return headerValueMatch(a.GetHeaderValueMatch())
	case a.GetQueryParameterValueMatch() != nil:
		return queryValueMatch(a.GetQueryParameterValueMatch())
	case a.GetRemoteAddressMatch() != nil:
		r := a.GetRemoteAddressMatch()
		return produced{key: or(r.GetDescriptorKey(), "remote_address_match"), vals: []value{{known, r.GetDescriptorValue()}},
			when: "the remote address matches its address_matcher"}
	//lint:ignore SA1019 the dynamic_metadata action is deprecated, but Envoy still runs it
	case a.GetDynamicMetadata() != nil:
		//lint:ignore SA1019 as above
		d := a.GetDynamicMetadata()
		p := produced{key: d.GetDescriptorKey(), vals: anyOnly}
		if d.GetDefaultValue() == "" {
			p.when = fmt.Sprintf("dynamic metadata %s is set", metadataKey(d.GetMetadataKey()))
		}
		return p
	case a.GetMetadata() != nil:
		return fromMetadata(a.GetMetadata())
	case a.GetExtension() != nil:
		return fromExtension(a.GetExtension())
	}
	return produced{problem: "an action of a kind lint does not know"}
}

// fromRequest is a request_headers or query_parameters action: what, a
// header or a query parameter, takes value v, unknown unless the route's
// match pins it; when it may be absent, the entry needs it present, or
// with skip_if_absent goes without it.
func fromRequest(key string, v value, present, skipIfAbsent bool, what string) produced {
	p := produced{key: key, vals: []value{v}}
	if !present {
		p.when = what + " is present"
		if skipIfAbsent {
			p.skip = what + " is absent"
		}
	}
	return p
}

// headerValueMatch is a header_value_match action.
func headerValueMatch(h *routev3.RateLimit_Action_HeaderValueMatch) produced {
	var names []string
	for _, m := range h.GetHeaders() {
		names = append(names, m.GetName())
	}
	return produced{key: or(h.GetDescriptorKey(), forwardauth.DefaultHeaderMatchKey), vals: []value{{known, h.GetDescriptorValue()}},
		when: matchWhen("headers", names, h.GetExpectMatch() == nil || h.GetExpectMatch().GetValue())}
}

// queryValueMatch is a query_parameter_value_match action.
func queryValueMatch(q *routev3.RateLimit_Action_QueryParameterValueMatch) produced {
	var names []string
	for _, m := range q.GetQueryParameters() {
		names = append(names, m.GetName())
	}
	return produced{key: or(q.GetDescriptorKey(), "query_match"), vals: []value{{known, q.GetDescriptorValue()}},
		when: matchWhen("query parameters", names, q.GetExpectMatch() == nil || q.GetExpectMatch().GetValue())}
}

// fromMetadata is a metadata action, from the dynamic metadata or the
// route entry's.
func fromMetadata(m *routev3.RateLimit_Action_MetaData) produced {
	p := produced{key: m.GetDescriptorKey(), vals: anyOnly}
	if m.GetDefaultValue() == "" {
		src := "dynamic"
		if m.GetSource() == routev3.RateLimit_Action_MetaData_ROUTE_ENTRY {
			src = "route entry"
		}
		p.when = fmt.Sprintf("%s metadata %s is set", src, metadataKey(m.GetMetadataKey()))
		if m.GetSkipIfAbsent() {
			p.skip = fmt.Sprintf("%s metadata %s is not set", src, metadataKey(m.GetMetadataKey()))
		}
	}
	return p
}

// fromExtension is an extension action: a CEL descriptor, or a matcher
// input, whose entry Envoy names after the extension.
func fromExtension(x *corev3.TypedExtensionConfig) produced {
	d := new(exprv3.Descriptor)
	tc := x.GetTypedConfig()
	switch {
	case tc != nil && tc.MessageIs(d) && tc.UnmarshalTo(d) == nil:
		return produced{key: d.GetDescriptorKey(), vals: anyOnly, when: "its expression evaluates"}
	case tc != nil && strings.HasSuffix(string(tc.MessageName()), "Input"):
		// A matcher input: Envoy names the entry after the extension.
		// (It also leaves the entry out when the input is an empty
		// string, a header sent empty: too rare to report.)
		return produced{key: x.GetName(), vals: anyOnly, when: fmt.Sprintf("input %q has a value", x.GetName())}
	}
	return produced{problem: fmt.Sprintf("extension %q: its descriptor entry cannot be derived", x.GetName())}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func matchWhen(what string, names []string, expect bool) string {
	verb := "match"
	if !expect {
		verb = "do not match"
	}
	if len(names) == 0 {
		return fmt.Sprintf("the %s %s", what, verb)
	}
	return fmt.Sprintf("the %s %s %s", what, strings.Join(names, ", "), verb)
}

func metadataKey(k *metadatav3.MetadataKey) string {
	parts := []string{k.GetKey()}
	for _, s := range k.GetPath() {
		parts = append(parts, s.GetKey())
	}
	return strconv.Quote(strings.Join(parts, "."))
}

// clusters are the values destination_cluster may take on a route.
func clusters(ra *routev3.RouteAction) []value {
	if c := ra.GetCluster(); c != "" {
		return []value{{known, c}}
	}
	wc := ra.GetWeightedClusters()
	if wc == nil {
		return anyOnly // cluster_header, a cluster specifier plugin
	}
	var vals []value
	seen := make(map[string]bool)
	for _, cw := range wc.GetClusters() {
		if cw.GetName() == "" {
			return anyOnly // a cluster_header
		}
		if !seen[cw.GetName()] {
			seen[cw.GetName()] = true
			vals = append(vals, value{known, cw.GetName()})
		}
	}
	if len(vals) == 0 {
		return anyOnly
	}
	return vals
}

// headerValue is what a route's match fixes of a request header: present
// reports whether every request on the route has the header.
func headerValue(m *routev3.RouteMatch, name string) (v value, present bool) {
	name = strings.ToLower(name)
	if name == ":path" {
		if cs := m.GetCaseSensitive(); cs != nil && !cs.GetValue() {
			return value{kind: anyValue}, true
		}
		switch {
		case m.GetPath() != "":
			return value{known, m.GetPath()}, true
		case m.GetPathSeparatedPrefix() != "":
			return value{prefixed, m.GetPathSeparatedPrefix()}, true
		case m.GetPrefix() != "":
			return value{prefixed, m.GetPrefix()}, true
		}
		return value{kind: anyValue}, true
	}
	for _, h := range m.GetHeaders() {
		if strings.ToLower(h.GetName()) != name || h.GetInvertMatch() || h.GetTreatMissingHeaderAsEmpty() {
			continue
		}
		if sm := h.GetStringMatch(); sm != nil {
			return stringMatch(sm), true
		}
		switch p := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_ExactMatch:
			//lint:ignore SA1019 deprecated in favour of string_match, still accepted by Envoy
			return value{known, p.ExactMatch}, true
		case *routev3.HeaderMatcher_PrefixMatch:
			//lint:ignore SA1019 as above
			return value{prefixed, p.PrefixMatch}, true
		case *routev3.HeaderMatcher_PresentMatch:
			return value{kind: anyValue}, p.PresentMatch
		}
		return value{kind: anyValue}, true // no specifier: present
	}
	return value{kind: anyValue}, strings.HasPrefix(name, ":")
}

// queryValue is what a route's match fixes of a query parameter.
func queryValue(m *routev3.RouteMatch, name string) (v value, present bool) {
	for _, q := range m.GetQueryParameters() {
		if q.GetName() != name {
			continue
		}
		if sm := q.GetStringMatch(); sm != nil {
			return stringMatch(sm), true
		}
		if p, ok := q.GetQueryParameterMatchSpecifier().(*routev3.QueryParameterMatcher_PresentMatch); ok {
			return value{kind: anyValue}, p.PresentMatch
		}
		return value{kind: anyValue}, true
	}
	return value{kind: anyValue}, false
}

// stringMatch is what a string matcher fixes of the value it matches.
func stringMatch(sm *matcherv3.StringMatcher) value {
	if sm.GetIgnoreCase() {
		return value{kind: anyValue}
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return value{known, p.Exact}
	case *matcherv3.StringMatcher_Prefix:
		return value{prefixed, p.Prefix}
	}
	return value{kind: anyValue}
}
