package edge

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// request is a sample request as the rate limit filter sees it.
type request struct {
	method  string
	path    string // with the query string, as in :path
	headers map[string]string
	remote  string // the client address (use_remote_address: the TCP peer)
}

// A few clients.
const (
	clientV4 = "203.0.113.7"
	clientV6 = "2001:db8::7"
)

// routeFor is the route Envoy picks for r: the first whose match fits, as
// Envoy's route table does. It knows the matchers config/envoy.yaml uses.
func routeFor(t *testing.T, vh *routev3.VirtualHost, r request) *routev3.Route {
	t.Helper()
	path, _, _ := strings.Cut(r.path, "?")
	for _, rt := range vh.GetRoutes() {
		m := rt.GetMatch()
		if len(m.GetHeaders()) > 0 || len(m.GetQueryParameters()) > 0 || m.GetCaseSensitive() != nil {
			t.Fatalf("route %s: header, query or case matchers are not simulated here", routeName(rt))
		}
		var ok bool
		switch p := m.GetPathSpecifier().(type) {
		case *routev3.RouteMatch_Path:
			ok = path == p.Path
		case *routev3.RouteMatch_Prefix:
			ok = strings.HasPrefix(path, p.Prefix)
		case *routev3.RouteMatch_PathSeparatedPrefix:
			ok = path == p.PathSeparatedPrefix || strings.HasPrefix(path, p.PathSeparatedPrefix+"/")
		default:
			t.Fatalf("route %s: path matcher %T is not simulated here", routeName(rt), p)
		}
		if ok {
			return rt
		}
	}
	return nil
}

func routeName(r *routev3.Route) string {
	if r.GetName() != "" {
		return r.GetName()
	}
	m := r.GetMatch()
	switch {
	case m.GetPath() != "":
		return "path " + m.GetPath()
	case m.GetPathSeparatedPrefix() != "":
		return "path_separated_prefix " + m.GetPathSeparatedPrefix()
	default:
		return "prefix " + m.GetPrefix()
	}
}

// envoyDescriptors builds the descriptors the rate limit filter sends for r:
// the route's rate_limits, then the virtual host's as the route's
// RateLimitPerRoute says (OVERRIDE by default: the virtual host's only when
// the route has none); none when the route disables the filter.
func envoyDescriptors(t *testing.T, e *edge, r request) [][]descriptors.Entry {
	t.Helper()
	rt := routeFor(t, e.vhost, r)
	if rt == nil {
		t.Fatalf("%s %s: no route", r.method, r.path)
	}
	vhOption := ratelimitfilterv3.RateLimitPerRoute_OVERRIDE
	if a := rt.GetTypedPerFilterConfig()[rateLimitFilter]; a != nil {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		switch c := m.(type) {
		case *routev3.FilterConfig:
			if c.GetDisabled() {
				return nil
			}
		case *ratelimitfilterv3.RateLimitPerRoute:
			if c.GetDomain() != "" {
				t.Fatalf("route %s: a RateLimitPerRoute domain is not simulated here", routeName(rt))
			}
			if len(c.GetRateLimits()) > 0 {
				// They replace the route's and the virtual host's.
				return perRouteDescriptors(t, c.GetRateLimits(), r, false)
			}
			vhOption = c.GetVhRateLimits()
		default:
			t.Fatalf("route %s: per-filter config %T is not simulated here", routeName(rt), m)
		}
	}
	var out [][]descriptors.Entry
	policy := func(rls []*routev3.RateLimit) {
		for _, rl := range rls {
			if rl.GetApplyOnStreamDone() {
				t.Fatalf("route %s: apply_on_stream_done outside a RateLimitPerRoute is not simulated here", routeName(rt))
			}
			if d, ok := populate(t, rl, r); ok {
				out = append(out, d)
			}
		}
	}
	policy(rt.GetRoute().GetRateLimits())
	switch vhOption {
	case ratelimitfilterv3.RateLimitPerRoute_INCLUDE:
		policy(e.vhost.GetRateLimits())
	case ratelimitfilterv3.RateLimitPerRoute_OVERRIDE:
		if len(rt.GetRoute().GetRateLimits()) == 0 {
			policy(e.vhost.GetRateLimits())
		}
	}
	return out
}

// populate is Envoy's RateLimitPolicyEntry: each action appends an entry;
// an action that cannot (a missing header) drops the whole descriptor,
// unless it is skip_if_absent, which drops only its entry.
func populate(t *testing.T, rl *routev3.RateLimit, r request) ([]descriptors.Entry, bool) {
	t.Helper()
	var d []descriptors.Entry
	for _, a := range rl.GetActions() {
		switch x := a.GetActionSpecifier().(type) {
		case *routev3.RateLimit_Action_RemoteAddress_:
			d = append(d, descriptors.Entry{Key: "remote_address", Value: netip.MustParseAddr(r.remote).String()})
		case *routev3.RateLimit_Action_MaskedRemoteAddress_:
			addr := netip.MustParseAddr(r.remote)
			bits := 32
			if v := x.MaskedRemoteAddress.GetV4PrefixMaskLen(); v != nil {
				bits = int(v.GetValue())
			}
			if addr.Is6() {
				bits = 128
				if v := x.MaskedRemoteAddress.GetV6PrefixMaskLen(); v != nil {
					bits = int(v.GetValue())
				}
			}
			d = append(d, descriptors.Entry{Key: "masked_remote_address", Value: netip.PrefixFrom(addr, bits).Masked().String()})
		case *routev3.RateLimit_Action_RequestHeaders_:
			v, ok := r.headers[strings.ToLower(x.RequestHeaders.GetHeaderName())]
			if !ok {
				if x.RequestHeaders.GetSkipIfAbsent() {
					continue
				}
				return nil, false
			}
			d = append(d, descriptors.Entry{Key: x.RequestHeaders.GetDescriptorKey(), Value: v})
		case *routev3.RateLimit_Action_GenericKey_:
			key := x.GenericKey.GetDescriptorKey()
			if key == "" {
				key = "generic_key"
			}
			d = append(d, descriptors.Entry{Key: key, Value: x.GenericKey.GetDescriptorValue()})
		default:
			t.Fatalf("rate limit action %T is not simulated here (envoy-rls lint knows them all)", x)
		}
	}
	return d, len(d) > 0
}

func shape(d []descriptors.Entry) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", e.Key, e.Value)
	}
	b.WriteByte(']')
	return b.String()
}

func ruleNames(n *descriptors.Node) string {
	var names []string
	for _, r := range n.Descriptor.Rules {
		if r.Unlimited {
			names = append(names, "unlimited")
		} else {
			names = append(names, r.Name)
		}
	}
	return strings.Join(names, "+")
}

// scopes are sample requests, one or more per scope, and the limits each
// descriptor Envoy sends for them must reach, in the order Envoy sends
// them (the route's, then the virtual host's).
var scopes = []struct {
	name string
	req  request
	want []string
}{
	{"anonymous: per IP and per subnet",
		request{"GET", "/", nil, clientV4},
		[]string{"per-ip", "per-subnet"}},
	{"anonymous over IPv6: the subnet is a /64",
		request{"GET", "/anything?x=1", nil, clientV6},
		[]string{"per-ip", "per-subnet"}},
	{"API key without a plan",
		request{"GET", "/v1/items", map[string]string{"x-api-key": "k1"}, clientV4},
		[]string{"per-ip", "per-subnet", "api-burst+api-daily"}},
	{"free plan",
		request{"GET", "/v1/items", map[string]string{"x-api-key": "k1", "x-plan": "free"}, clientV4},
		[]string{"per-ip", "per-subnet", "free-burst+free-daily"}},
	{"pro plan",
		request{"GET", "/v1/items", map[string]string{"x-api-key": "k2", "x-plan": "pro"}, clientV4},
		[]string{"per-ip", "per-subnet", "pro-burst+pro-daily+pro-monthly"}},
	{"enterprise plan",
		request{"GET", "/v1/items", map[string]string{"x-api-key": "k3", "x-plan": "enterprise"}, clientV4},
		[]string{"per-ip", "per-subnet", "enterprise-burst"}},
	{"a plan the limits do not name",
		request{"GET", "/v1/items", map[string]string{"x-api-key": "k4", "x-plan": "platinum"}, clientV4},
		[]string{"per-ip", "per-subnet", "other-plan-burst+other-plan-daily"}},
	{"a plan without a key: no key, no plan limit",
		request{"GET", "/v1/items", map[string]string{"x-plan": "pro"}, clientV4},
		[]string{"per-ip", "per-subnet"}},
	{"login: by IP and by user",
		request{"POST", "/login", map[string]string{"x-user": "alice"}, clientV4},
		[]string{"per-ip", "per-subnet", "login-per-ip", "login-per-user", "login-lockout"}},
	{"login with a query string and a trailing segment",
		request{"POST", "/login/?next=/home", map[string]string{"x-user": "alice"}, clientV4},
		[]string{"per-ip", "per-subnet", "login-per-ip", "login-per-user", "login-lockout"}},
	{"login without x-user: by IP only",
		request{"POST", "/login", nil, clientV4},
		[]string{"per-ip", "per-subnet", "login-per-ip", "login-lockout"}},
	// The login route's own rate_limits replace the virtual host's, so an
	// API key is not counted on it.
	{"login with an API key",
		request{"POST", "/login", map[string]string{"x-user": "bob", "x-api-key": "k1"}, clientV6},
		[]string{"per-ip", "per-subnet", "login-per-ip", "login-per-user", "login-lockout"}},
	{"search: shaped for everyone",
		request{"GET", "/api/search?q=envoy", nil, clientV4},
		[]string{"search-shaping", "per-ip", "per-subnet"}},
	{"a path that only starts like search",
		request{"GET", "/api/searchlight", nil, clientV4},
		[]string{"per-ip", "per-subnet"}},
	{"reports: in flight per API key, with the per-IP limits repeated",
		request{"GET", "/api/reports/monthly", map[string]string{"x-api-key": "k1"}, clientV4},
		[]string{"per-ip", "per-subnet", "reports-in-flight"}},
	{"reports without a key: per IP only",
		request{"GET", "/api/reports", nil, clientV6},
		[]string{"per-ip", "per-subnet"}},
	{"health checks: the filter is off",
		request{"GET", "/healthz", nil, clientV4},
		nil},
}

// TestActionsMatchLimits builds, for each sample request, the descriptors
// the routes' actions produce and matches them in config/limits.yaml as
// envoy-rls does: each must end on a limit (a descriptor that matches
// nothing is never limited, silently). Then every limit in the file must
// have been reached by some request (one that none reaches is dead config).
// A small table, not a proof: envoy-rls lint derives the shapes from every
// action type.
func TestActionsMatchLimits(t *testing.T) {
	e := loadEdge(t)
	cfg, domain := loadLimits(t)
	ix := descriptors.NewIndex(cfg)
	reached := map[*config.Descriptor]bool{}
	for _, sc := range scopes {
		t.Run(sc.name, func(t *testing.T) {
			ds := envoyDescriptors(t, e, sc.req)
			var got []string
			for _, d := range ds {
				end, known, _ := ix.Match(e.filter.GetDomain(), d, nil)
				if !known {
					t.Fatalf("domain %q is not in %s", e.filter.GetDomain(), limitsYAMLPath)
				}
				if end == nil || len(end.Descriptor.Rules) == 0 {
					t.Errorf("%s matches no limit: it is never limited", shape(d))
					got = append(got, "none")
					continue
				}
				reached[end.Descriptor] = true
				got = append(got, ruleNames(end))
			}
			if strings.Join(got, " ") != strings.Join(sc.want, " ") {
				var shapes []string
				for _, d := range ds {
					shapes = append(shapes, shape(d))
				}
				t.Errorf("limits %q, want %q (descriptors %s)", got, sc.want, strings.Join(shapes, " "))
			}
		})
	}
	var walk func([]*config.Descriptor)
	walk = func(ds []*config.Descriptor) {
		for _, d := range ds {
			if len(d.Rules) > 0 && !reached[d] {
				t.Errorf("%s:%d: %s=%s (%s) is reached by no sample request: add one, or the limit is dead",
					limitsYAMLPath, d.Line, d.Key, d.Value, ruleNamesOf(d))
			}
			walk(d.Descriptors)
		}
	}
	walk(domain.Descriptors)
}

func ruleNamesOf(d *config.Descriptor) string {
	var names []string
	for _, r := range d.Rules {
		names = append(names, r.Name)
	}
	return strings.Join(names, "+")
}

// server is envoy-rls's RateLimitService on config/limits.yaml, over real
// gRPC on a loopback port, with the embedded store on a clock the test
// moves.
type server struct {
	client rlsv3.RateLimitServiceClient
	clock  *atomic.Int64 // microseconds since the epoch
}

func startServer(t *testing.T) *server {
	t.Helper()
	cfg, _ := loadLimits(t)
	clock := &atomic.Int64{}
	// 2024-01-01T12:00:00Z: mid-day, mid-hour, on a minute boundary.
	clock.Store(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC).UnixMicro())
	store := memory.New(memory.Options{Now: clock.Load, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	svc, err := rls.New(descriptors.NewIndex(cfg), rls.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &server{client: rlsv3.NewRateLimitServiceClient(conn), clock: clock}
}

// ask sends what the rate limit filter sends for ds, with its timeout as
// the call's deadline.
func (s *server) ask(t *testing.T, e *edge, ds [][]descriptors.Entry) *rlsv3.RateLimitResponse {
	t.Helper()
	req := &rlsv3.RateLimitRequest{Domain: e.filter.GetDomain()}
	for _, d := range ds {
		rd := &ratelimitv3.RateLimitDescriptor{}
		for _, en := range d {
			rd.Entries = append(rd.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: en.Key, Value: en.Value})
		}
		req.Descriptors = append(req.Descriptors, rd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.filter.GetTimeout().AsDuration())
	defer cancel()
	resp, err := s.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.GetStatuses()) != len(ds) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(ds))
	}
	return resp
}

// TestScopesOverGRPC sends each sample request's descriptors to envoy-rls
// over gRPC: a first request is allowed, and each status reports one of
// the limits its descriptor matched.
func TestScopesOverGRPC(t *testing.T) {
	e := loadEdge(t)
	s := startServer(t)
	for _, sc := range scopes {
		ds := envoyDescriptors(t, e, sc.req)
		if len(ds) == 0 {
			continue // Envoy does not call envoy-rls
		}
		resp := s.ask(t, e, ds)
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("%s: %v, want OK", sc.name, resp.GetOverallCode())
		}
		for i, st := range resp.GetStatuses() {
			if name := st.GetCurrentLimit().GetName(); !strings.Contains("+"+sc.want[i]+"+", "+"+name+"+") {
				t.Errorf("%s: descriptor %s reported limit %q, want one of %s", sc.name, shape(ds[i]), name, sc.want[i])
			}
		}
	}
}

// xRateLimitHeaders is what Envoy's rate limit filter makes of the statuses
// with enable_x_ratelimit_headers: DRAFT_VERSION_03 (XRateLimitHeaderUtils):
// the status with the least remaining gives -limit's first value,
// -remaining and -reset (whole seconds, truncated); every status with a
// limit adds `N;w=WINDOW;name="NAME"` to -limit, in descriptor order.
func xRateLimitHeaders(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) (limit, remaining, reset string) {
	windows := map[rlsv3.RateLimitResponse_RateLimit_Unit]int64{
		rlsv3.RateLimitResponse_RateLimit_SECOND: 1,
		rlsv3.RateLimitResponse_RateLimit_MINUTE: 60,
		rlsv3.RateLimitResponse_RateLimit_HOUR:   3600,
		rlsv3.RateLimitResponse_RateLimit_DAY:    86400,
		rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
		rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
		rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
	}
	var min *rlsv3.RateLimitResponse_DescriptorStatus
	var policy strings.Builder
	for _, st := range statuses {
		cl := st.GetCurrentLimit()
		if cl == nil {
			continue
		}
		if min == nil || st.GetLimitRemaining() < min.GetLimitRemaining() {
			min = st
		}
		w := windows[cl.GetUnit()]
		if w == 0 {
			continue
		}
		fmt.Fprintf(&policy, ", %d;w=%d", cl.GetRequestsPerUnit(), w)
		if cl.GetName() != "" {
			fmt.Fprintf(&policy, ";name=%q", cl.GetName())
		}
	}
	if min == nil {
		return "", "", ""
	}
	return fmt.Sprint(min.GetCurrentLimit().GetRequestsPerUnit(), policy.String()),
		fmt.Sprint(min.GetLimitRemaining()),
		fmt.Sprint(min.GetDurationUntilReset().GetSeconds())
}

// TestLoginEndsIn429 is docs/edge.md's curl loop over gRPC: six logins as
// alice from one address, 10 ms apart. Five are allowed, the sixth is
// refused by login-per-ip, and the x-ratelimit-* headers Envoy would build
// from the statuses are the ones docs/edge.md shows.
func TestLoginEndsIn429(t *testing.T) {
	e := loadEdge(t)
	s := startServer(t)
	ds := envoyDescriptors(t, e, request{"POST", "/login", map[string]string{"x-user": "alice"}, "172.18.0.1"})
	const wantLimit = `5, 600;w=60;name="per-ip", 6000;w=60;name="per-subnet", 5;w=60;name="login-per-ip", 10;w=3600;name="login-per-user", 5;w=3600;name="login-lockout"`
	for i := 1; i <= 6; i++ {
		resp := s.ask(t, e, ds)
		limit, remaining, reset := xRateLimitHeaders(resp.GetStatuses())
		t.Logf("login %d: %v\n  x-ratelimit-limit: %s\n  x-ratelimit-remaining: %s\n  x-ratelimit-reset: %s",
			i, resp.GetOverallCode(), limit, remaining, reset)
		wantCode, wantRemaining, wantReset := rlsv3.RateLimitResponse_OK, fmt.Sprint(5-i), "60"
		if i == 6 {
			// The first attempt, 50 ms ago, leaves the minute in 59.95 s.
			wantCode, wantRemaining, wantReset = rlsv3.RateLimitResponse_OVER_LIMIT, "0", "59"
		}
		if resp.GetOverallCode() != wantCode || limit != wantLimit || remaining != wantRemaining || reset != wantReset {
			t.Errorf("login %d: %v, limit %q, remaining %s, reset %s; want %v, %q, %s, %s",
				i, resp.GetOverallCode(), limit, remaining, reset, wantCode, wantLimit, wantRemaining, wantReset)
		}
		s.clock.Add((10 * time.Millisecond).Microseconds())
	}

	// docs/edge.md shows these headers for the refused login.
	edge := string(readRepoFile(t, "docs/edge.md"))
	for _, line := range []string{
		"x-ratelimit-limit: " + wantLimit,
		"x-ratelimit-remaining: 0",
		"x-ratelimit-reset: 59",
	} {
		if !strings.Contains(edge, line) {
			t.Errorf("docs/edge.md does not show %q", line)
		}
	}
}
