package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// ParseBootstrap reads an Envoy bootstrap written in YAML or JSON, strictly
// (an unknown field is an error) and validated with Envoy's own constraints.
// A typed_config whose type this build does not link in is not parsed: it
// stands for an extension lint has no use for. Lint links in only the
// extensions it reads (the rate limit and quota filters, the connection
// manager, the descriptor extensions), not every one an edge bootstrap may
// hold: checking a CORS or JWT config is Envoy's `--mode validate`, and
// registering them for lint put them in the server's binary too.
func ParseBootstrap(data []byte) (*bootstrapv3.Bootstrap, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("empty bootstrap")
	}
	doc, err := jsonValue(doc, "")
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(stubUnknownAnys(doc))
	if err != nil {
		return nil, err
	}
	b := new(bootstrapv3.Bootstrap)
	if err := protojson.Unmarshal(js, b); err != nil {
		// Positions are in the JSON made from the YAML: no use to a reader.
		return nil, errors.New(jsonPosition.ReplaceAllString(err.Error(), ""))
	}
	if err := b.ValidateAll(); err != nil {
		return nil, err
	}
	if err := validateAnys(b.ProtoReflect()); err != nil {
		return nil, err
	}
	return b, nil
}

// jsonValue turns a decoded YAML value into one encoding/json can write.
func jsonValue(v any, path string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			j, err := jsonValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			v[k] = j
		}
		return v, nil
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			ks := fmt.Sprint(k)
			j, err := jsonValue(e, path+"."+ks)
			if err != nil {
				return nil, err
			}
			m[ks] = j
		}
		return m, nil
	case []any:
		for i, e := range v {
			j, err := jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			v[i] = j
		}
		return v, nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%s: %v is not a number JSON can hold", strings.TrimPrefix(path, "."), v)
		}
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	}
	return v, nil
}

var jsonPosition = regexp.MustCompile(`\(line \d+:\d+\): `)

var emptyURL = "type.googleapis.com/" + string((&emptypb.Empty{}).ProtoReflect().Descriptor().FullName())

// stubUnknownAnys replaces every Any whose type is not linked in by an
// Empty, so that protojson can parse the rest.
func stubUnknownAnys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if t, ok := v["@type"].(string); ok {
			if _, err := protoregistry.GlobalTypes.FindMessageByURL(t); err != nil {
				return map[string]any{"@type": emptyURL}
			}
		}
		for k, e := range v {
			v[k] = stubUnknownAnys(e)
		}
	case []any:
		for i, e := range v {
			v[i] = stubUnknownAnys(e)
		}
	}
	return v
}

// validateAnys validates the message inside every Any under m, as Envoy
// does when it loads an extension's config.
func validateAnys(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = validateMessage(l.Get(i).Message())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = validateMessage(mv.Message())
				return err == nil
			})
		default:
			err = validateMessage(v.Message())
		}
		return err == nil
	})
	return err
}

func validateMessage(m protoreflect.Message) error {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return validateAnys(m)
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		return err
	}
	if v, ok := inner.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return err
		}
	}
	return validateAnys(inner.ProtoReflect())
}

// envoyConfig is what lint needs of a bootstrap.
type envoyConfig struct {
	// nodeCluster is the node's cluster, the value of source_cluster;
	// empty when left to --service-cluster.
	nodeCluster string
	// unchecked are the parts that cannot be checked, not tied to a filter.
	unchecked []part
	filters   []*filter
	quotas    []*quotaFilter
}

type part struct{ where, msg string }

// filter is one envoy.filters.http.ratelimit of an HTTP connection manager.
type filter struct {
	listener   string
	name       string
	domain     string
	stage      uint32
	timeout    time.Duration
	timeoutSet bool
	// disabled: the filter applies only where a per-route config enables it.
	disabled   bool
	rateLimits []*routev3.RateLimit
	// routes is the connection manager's static route_config; nil when
	// unchecked says why.
	routes    *routev3.RouteConfiguration
	unchecked string
	// prefix is prepended to route labels when several connection managers
	// hold rate limit filters.
	prefix string
}

func (f *filter) where() string {
	return fmt.Sprintf("listener %q filter %q", f.listener, f.name)
}

// extract finds the rate limit filters of b's static listeners.
func extract(b *bootstrapv3.Bootstrap) *envoyConfig {
	env := &envoyConfig{nodeCluster: b.GetNode().GetCluster()}
	if dr := b.GetDynamicResources(); dr.GetLdsConfig() != nil || dr.GetLdsResourcesLocator() != "" {
		env.unchecked = append(env.unchecked, part{"dynamic_resources", "listeners come from LDS: only static listeners can be checked"})
	}
	managers := 0
	for i, l := range b.GetStaticResources().GetListeners() {
		name := l.GetName()
		if name == "" {
			name = fmt.Sprintf("static_resources.listeners[%d]", i)
		}
		chains := l.GetFilterChains()
		if dc := l.GetDefaultFilterChain(); dc != nil {
			chains = append(chains[:len(chains):len(chains)], dc)
		}
		for _, fc := range chains {
			for _, nf := range fc.GetFilters() {
				if n := env.networkFilter(name, nf); n > 0 {
					managers++
				}
			}
		}
	}
	if managers > 1 {
		for _, f := range env.filters {
			f.prefix = fmt.Sprintf("listener %q ", f.listener)
		}
	}
	return env
}

// networkFilter adds the rate limit filters of nf, if it is an HTTP
// connection manager, and returns how many it added.
func (env *envoyConfig) networkFilter(listener string, nf *listenerv3.Filter) int {
	if cd := nf.GetConfigDiscovery(); cd != nil {
		for _, u := range cd.GetTypeUrls() {
			if strings.HasSuffix(u, "http_connection_manager.v3.HttpConnectionManager") {
				env.unchecked = append(env.unchecked, part{fmt.Sprintf("listener %q filter %q", listener, nf.GetName()),
					"the HTTP connection manager comes from ECDS: only a static one can be checked"})
			}
		}
		return 0
	}
	hcm := new(hcmv3.HttpConnectionManager)
	if a := nf.GetTypedConfig(); a == nil || !a.MessageIs(hcm) || a.UnmarshalTo(hcm) != nil {
		return 0
	}
	var routes *routev3.RouteConfiguration
	var unchecked string
	switch {
	case hcm.GetRouteConfig() != nil:
		routes = hcm.GetRouteConfig()
		if routes.GetVhds() != nil {
			unchecked = "virtual hosts also come from VHDS: only the static ones are checked"
		}
	case hcm.GetRds() != nil:
		unchecked = fmt.Sprintf("routes come from RDS (route_config_name %q): only a static route_config can be checked", hcm.GetRds().GetRouteConfigName())
	case hcm.GetScopedRoutes() != nil:
		unchecked = "routes are scoped_routes: only a static route_config can be checked"
	default:
		unchecked = "the HTTP connection manager has no route_config"
	}
	n := 0
	for _, hf := range hcm.GetHttpFilters() {
		f := &filter{listener: listener, name: hf.GetName(), disabled: hf.GetDisabled(), routes: routes, unchecked: unchecked}
		if cd := hf.GetConfigDiscovery(); cd != nil {
			for _, u := range cd.GetTypeUrls() {
				if strings.HasSuffix(u, "ratelimit.v3.RateLimit") {
					env.unchecked = append(env.unchecked, part{f.where(), "the filter's config comes from ECDS: only a static one can be checked"})
				}
			}
			continue
		}
		if q := quotaFilterOf(listener, hf); q != nil {
			env.quotas = append(env.quotas, q)
			continue
		}
		rl := new(ratelimitv3.RateLimit)
		if a := hf.GetTypedConfig(); a == nil || !a.MessageIs(rl) || a.UnmarshalTo(rl) != nil {
			continue
		}
		f.domain = rl.GetDomain()
		f.stage = rl.GetStage()
		if t := rl.GetTimeout(); t != nil {
			f.timeout, f.timeoutSet = t.AsDuration(), true
		}
		f.rateLimits = rl.GetRateLimits()
		env.filters = append(env.filters, f)
		n++
	}
	return n
}

// entry is one rate_limits entry as it applies to one route.
type entry struct {
	// where names the entry in findings.
	where string
	// domain is the domain the descriptor goes to; domainWhere names the
	// per-route config that set it, if one did.
	domain, domainWhere string
	rl                  *routev3.RateLimit
	route               *routev3.Route
	nodeCluster         string
	// perRoute: the entry is a RateLimitPerRoute's, the only place where
	// Envoy honours hits_addend (concurrency.go).
	perRoute bool
	// forwardAuth: the entry is a forward-auth policy's (forwardauth.go),
	// sent by envoy-rls's endpoint rather than by Envoy.
	forwardAuth bool
}

// sender names who sends e's descriptors, in findings.
func (e *entry) sender() string {
	if e.forwardAuth {
		return "forward-auth"
	}
	return "Envoy"
}

// entriesFor lists the rate_limits entries f applies, route by route.
func (env *envoyConfig) entriesFor(f *filter) []*entry {
	var out []*entry
	rc := f.routes
	for _, vh := range rc.GetVirtualHosts() {
		vhWhere := fmt.Sprintf("%svhost %q", f.prefix, vh.GetName())
		for i, r := range vh.GetRoutes() {
			if r.GetRoute() == nil {
				continue // redirect, direct_response…: Envoy's filter skips them
			}
			rWhere := vhWhere + " route " + routeName(r, i)
			pr := perRouteConfig(f.name, []level{
				{rWhere, r.GetTypedPerFilterConfig()},
				{vhWhere, vh.GetTypedPerFilterConfig()},
				{fmt.Sprintf("%sroute_config %q", f.prefix, rc.GetName()), rc.GetTypedPerFilterConfig()},
			})
			if pr.disabled || (f.disabled && !pr.present) {
				continue
			}
			re := routeEntries{out: out, stage: f.stage,
				base: entry{domain: f.domain, route: r, nodeCluster: env.nodeCluster}}
			if d := pr.cfg.GetDomain(); d != "" {
				re.base.domain, re.base.domainWhere = d, pr.where+" typed_per_filter_config"
			}
			switch {
			case len(pr.cfg.GetRateLimits()) > 0:
				re.base.perRoute = true
				re.add(pr.where+" typed_per_filter_config", pr.cfg.GetRateLimits(), false)
			case len(f.rateLimits) > 0:
				re.add(f.where(), f.rateLimits, false)
			default:
				re.addRouteAndVhost(r, rWhere, vh, vhWhere, pr)
			}
			out = re.out
		}
	}
	return out
}

// routeEntries gathers the entries one route applies: each is base, but
// for where it stands and its rate_limits entry.
type routeEntries struct {
	base entry
	// stage is the filter's: a route's or a vhost's entries of another
	// stage are not its.
	stage uint32
	out   []*entry
}

// add adds an entry for each of rls, which stand at where; byStage skips
// those of another stage than the filter's.
func (re *routeEntries) add(where string, rls []*routev3.RateLimit, byStage bool) {
	for j, rl := range rls {
		if byStage && rl.GetStage().GetValue() != re.stage {
			continue
		}
		e := re.base
		e.where = fmt.Sprintf("%s rate_limits[%d]", where, j)
		e.rl = rl
		re.out = append(re.out, &e)
	}
}

// addRouteAndVhost adds the entries of route r, when neither a per-route
// config nor the filter gives its own: r's rate_limits, and its vhost's as
// vh_rate_limits (or the deprecated include_vh_rate_limits) says.
func (re *routeEntries) addRouteAndVhost(r *routev3.Route, rWhere string, vh *routev3.VirtualHost, vhWhere string, pr perRoute) {
	ra := r.GetRoute()
	re.add(rWhere, ra.GetRateLimits(), true)
	vhOpt := ratelimitv3.RateLimitPerRoute_OVERRIDE
	if pr.cfg != nil {
		vhOpt = pr.cfg.GetVhRateLimits()
	}
	//lint:ignore SA1019 deprecated, but Envoy still honours it, so the lint must too
	if ra.GetIncludeVhRateLimits().GetValue() {
		vhOpt = ratelimitv3.RateLimitPerRoute_INCLUDE
	}
	switch vhOpt {
	case ratelimitv3.RateLimitPerRoute_INCLUDE:
		re.add(vhWhere, vh.GetRateLimits(), true)
	case ratelimitv3.RateLimitPerRoute_OVERRIDE:
		if len(ra.GetRateLimits()) == 0 {
			re.add(vhWhere, vh.GetRateLimits(), true)
		}
	}
}

// routeName names a route by its name, or else by its match.
func routeName(r *routev3.Route, i int) string {
	if r.GetName() != "" {
		return fmt.Sprintf("%q", r.GetName())
	}
	m := r.GetMatch()
	switch {
	case m.GetPath() != "":
		return fmt.Sprintf("path %q", m.GetPath())
	case m.GetPathSeparatedPrefix() != "":
		return fmt.Sprintf("path_separated_prefix %q", m.GetPathSeparatedPrefix())
	case m.GetSafeRegex() != nil:
		return fmt.Sprintf("safe_regex %q", m.GetSafeRegex().GetRegex())
	case m.GetPathSpecifier() != nil:
		if _, ok := m.GetPathSpecifier().(*routev3.RouteMatch_Prefix); ok {
			return fmt.Sprintf("prefix %q", m.GetPrefix())
		}
	}
	return fmt.Sprintf("#%d", i)
}

// level is one place a typed_per_filter_config may be, most specific first.
type level struct {
	where string
	tpfc  map[string]*anypb.Any
}

// perRoute is the most specific per-route config of one filter.
type perRoute struct {
	where string
	// present: some level configures the filter (which enables a filter
	// that is disabled by default); disabled: that config disables it.
	present, disabled bool
	cfg               *ratelimitv3.RateLimitPerRoute
}

func perRouteConfig(name string, levels []level) perRoute {
	for _, l := range levels {
		a, ok := l.tpfc[name]
		if !ok {
			continue
		}
		pr := perRoute{where: l.where, present: true}
		fc := new(routev3.FilterConfig)
		if a.MessageIs(fc) && a.UnmarshalTo(fc) == nil {
			pr.disabled = fc.GetDisabled()
			a = fc.GetConfig()
		}
		cfg := new(ratelimitv3.RateLimitPerRoute)
		if a != nil && a.MessageIs(cfg) && a.UnmarshalTo(cfg) == nil {
			pr.cfg = cfg
		}
		return pr
	}
	return perRoute{}
}
