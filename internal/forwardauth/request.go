package forwardauth

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// MaxValueBytes bounds a value a rule reads from the forwarded request (a
// header, the path, a query parameter). The service would hash a longer
// value into its key rather than refuse it, but a value this long is no
// client's name, only a way to make the service hash and hold large
// strings, so forward-auth refuses it (431).
const MaxValueBytes = 1024

// Outcomes of a forward-auth call, the values of the outcome label of
// rls_forward_auth_total: a fixed set, so that no request value becomes
// a label.
const (
	OutcomeAllowed         = "allowed"
	OutcomeRefused         = "refused"
	OutcomeNoDescriptor    = "no_descriptor"
	OutcomeUnknownPolicy   = "unknown_policy"
	OutcomeUnknownDomain   = "unknown_domain"
	OutcomeMissingForward  = "missing_forwarded"
	OutcomeRepeatedHeader  = "repeated_header"
	OutcomeTooLong         = "too_long"
	OutcomeBadForwardedFor = "bad_forwarded_for"
	OutcomeBadRequest      = "bad_request"
	OutcomeError           = "error"
)

// Refusal is a forwarded request that gets no decision: the HTTP status,
// the outcome it is counted as, and the reason given to the caller.
type Refusal struct {
	Status  int
	Outcome string
	Reason  string
}

func (r *Refusal) Error() string { return r.Reason }

func refuse(status int, outcome, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Outcome: outcome, Reason: fmt.Sprintf(format, args...)}
}

// Request is the original request a proxy forwards, as the rules read
// it. Method and URI are set only when the proxy sent them: a rule that
// reads them refuses a call without them rather than key on "".
type Request struct {
	Method, URI, Authority string
	// Client is the client's address (Config.Client).
	Client netip.Addr
	// Header is the original request's headers, as the proxy passed them.
	Header http.Header
}

// ForwardedRequest reads the original request from h, the headers of the
// proxy's call, for the client at client: X-Forwarded-Method, -Uri and -Host (Caddy, Traefik),
// else X-Original-Method and X-Original-URI (nginx, as the documented
// configuration sets them).
func ForwardedRequest(h http.Header, client netip.Addr) Request {
	first := func(names ...string) string {
		for _, n := range names {
			if v := h.Get(n); v != "" {
				return v
			}
		}
		return ""
	}
	return Request{
		Method:    first("X-Forwarded-Method", "X-Original-Method"),
		URI:       first("X-Forwarded-Uri", "X-Original-Uri"),
		Authority: first("X-Forwarded-Host"),
		Client:    client,
		Header:    h,
	}
}

// Descriptors builds the policy's descriptors for req, as Envoy builds a
// route's: a descriptor an action cannot fill (a header absent without
// skip_if_absent, a header_value_match that does not match) is left out
// whole. A request the rules cannot read safely gets a Refusal: a
// forwarded method or URI a rule needs and the proxy did not send, a
// header a rule reads that is repeated, or a value over MaxValueBytes.
func (p *Policy) Descriptors(req *Request) ([]*ratelimitv3.RateLimitDescriptor, *Refusal) {
	var out []*ratelimitv3.RateLimitDescriptor
	for i := range p.descriptors {
		d, err := p.descriptors[i].build(req)
		if err != nil {
			return nil, err
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// build returns the rule's descriptor for req, nil when it is left out.
func (r *descriptorRule) build(req *Request) (*ratelimitv3.RateLimitDescriptor, *Refusal) {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := range r.actions {
		e, ok, err := r.actions[i].entry(req)
		switch {
		case err != nil:
			return nil, err
		case !ok && r.actions[i].skipIfAbsent:
			continue
		case !ok:
			return nil, nil
		}
		d.Entries = append(d.Entries, e)
	}
	if len(d.Entries) == 0 {
		return nil, nil
	}
	if r.hits > 0 {
		d.HitsAddend = wrapperspb.UInt64(r.hits)
	}
	return d, nil
}

type descEntry = *ratelimitv3.RateLimitDescriptor_Entry

// entry is the action's entry for req; ok false when it has none.
func (a *action) entry(req *Request) (descEntry, bool, *Refusal) {
	mk := func(v string) descEntry { return &ratelimitv3.RateLimitDescriptor_Entry{Key: a.key, Value: v} }
	switch a.kind {
	case remoteAddress:
		return mk(req.Client.String()), req.Client.IsValid(), nil
	case maskedRemoteAddress:
		if !req.Client.IsValid() {
			return nil, false, nil
		}
		bits := a.v4Bits
		if req.Client.Is6() {
			bits = a.v6Bits
		}
		return mk(netip.PrefixFrom(req.Client, bits).Masked().String()), true, nil
	case genericKey:
		return mk(a.value), true, nil
	case requestHeader:
		v, ok, err := req.header(a.name, a.canon)
		return mk(v), ok, err
	case queryParameter:
		v, ok, err := req.query(a.name)
		return mk(v), ok, err
	}
	// headerValueMatch: Envoy's, whether every matcher matches compared
	// with expect_match, default_value when it is not as expected.
	all := true
	for i := range a.matchers {
		v, ok, err := req.header(a.matchers[i].name, a.matchers[i].canon)
		if err != nil {
			return nil, false, err
		}
		if !a.matchers[i].matches(v, ok) {
			all = false
			break
		}
	}
	if all == a.expectMatch {
		return mk(a.value), true, nil
	}
	return mk(a.defaultValue), a.defaultValue != "", nil
}

// header is the value of the header name (lower case; canon, its canonical
// form) or pseudo-header.
func (req *Request) header(name, canon string) (string, bool, *Refusal) {
	var v string
	switch name {
	case ":path":
		v = req.URI
	case ":method":
		v = req.Method
	case ":authority":
		v = req.Authority
	default:
		vs := req.Header[canon]
		switch {
		case len(vs) == 0:
			return "", false, nil
		case len(vs) > 1:
			return "", false, refuse(http.StatusBadRequest, OutcomeRepeatedHeader, "header %s is repeated: a rule reads it, and which value to key on is ambiguous", name)
		}
		return checkLength(name, vs[0])
	}
	if v == "" {
		return "", false, refuse(http.StatusBadRequest, OutcomeMissingForward, "a rule reads %s, and the call has no %s: the proxy must forward it", name, forwardedNames[name])
	}
	return checkLength(name, v)
}

var forwardedNames = map[string]string{
	":path":      "X-Forwarded-Uri or X-Original-URI",
	":method":    "X-Forwarded-Method or X-Original-Method",
	":authority": "X-Forwarded-Host",
}

func checkLength(name, v string) (string, bool, *Refusal) {
	if len(v) > MaxValueBytes {
		return "", false, refuse(http.StatusRequestHeaderFieldsTooLarge, OutcomeTooLong, "%s is %d bytes, above the %d a rule reads", name, len(v), MaxValueBytes)
	}
	return v, true, nil
}

// query is the value of the query parameter name of the forwarded URI.
func (req *Request) query(name string) (string, bool, *Refusal) {
	uri, _, err := req.header(":path", ":path")
	if err != nil {
		return "", false, err
	}
	_, raw, _ := strings.Cut(uri, "?")
	q, perr := url.ParseQuery(raw)
	if perr != nil {
		return "", false, refuse(http.StatusBadRequest, OutcomeBadRequest, "the forwarded URI's query does not parse: %v", perr)
	}
	vs := q[name]
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", false, refuse(http.StatusBadRequest, OutcomeRepeatedHeader, "query parameter %s is repeated: a rule reads it", name)
	}
	return vs[0], true, nil
}
