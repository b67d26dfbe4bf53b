package forwardauth

import (
	"encoding/json"
	"fmt"
	"net/textproto"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// descriptorRule is one entry of a policy's rate_limits: the actions that
// build one descriptor, and its hits (0: the request's one hit).
type descriptorRule struct {
	actions []action
	hits    uint64
}

// actionKind is which of Envoy's actions an action is.
type actionKind int

const (
	remoteAddress actionKind = iota
	maskedRemoteAddress
	requestHeader
	queryParameter
	genericKey
	headerValueMatch
)

// action is one compiled rate limit action: the entry it adds to a
// descriptor, and where its value comes from.
// The keys Envoy gives a generic_key and a header_value_match entry whose
// descriptor_key is not set. lint reads them too, so that what it checks
// a policy against is what the endpoint sends.
const (
	DefaultGenericKey     = "generic_key"
	DefaultHeaderMatchKey = "header_match"
)

type action struct {
	kind actionKind
	// key is the entry's key; value the entry's value for generic_key and
	// header_value_match.
	key, value string
	// name is the header (lower case, or a pseudo-header) or the query
	// parameter read; canon is the header's canonical form, the key of
	// http.Header, made once here rather than at every lookup.
	name, canon  string
	skipIfAbsent bool
	// v4Bits and v6Bits are masked_remote_address's prefix lengths.
	v4Bits, v6Bits int
	// header_value_match's.
	matchers     []headerMatcher
	expectMatch  bool
	defaultValue string
}

// compileRateLimit parses one rate_limits entry as Envoy's
// config.route.v3.RateLimit (YAML to JSON to protojson, then the proto's
// own validation), so that its vocabulary is exactly Envoy's, and keeps
// the actions forward-auth can evaluate. Errors carry the entry's line,
// or the action's. It also returns the entry as parsed, for lint.
func compileRateLimit(n *yaml.Node) (descriptorRule, *routev3.RateLimit, *Error) {
	fail := func(line int, word, format string, args ...any) (descriptorRule, *routev3.RateLimit, *Error) {
		return descriptorRule{}, nil, &Error{Line: line, Word: word, Msg: fmt.Sprintf(format, args...)}
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return fail(n.Line, "rate_limits", "%v", err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return fail(n.Line, "rate_limits", "not a rate limit: %v", err)
	}
	rl := new(routev3.RateLimit)
	if err := protojson.Unmarshal(js, rl); err != nil {
		return fail(n.Line, "rate_limits", "not an Envoy RateLimit: %v", err)
	}
	if err := rl.Validate(); err != nil {
		return fail(n.Line, "rate_limits", "%v", err)
	}
	switch {
	case rl.GetLimit() != nil:
		return fail(n.Line, "limit", "limit overrides read Envoy's dynamic metadata, which a forwarded request does not have")
	case rl.GetStage().GetValue() != 0:
		return fail(n.Line, "stage", "stages are Envoy's filter stages; forward-auth has one")
	case rl.GetHitsAddend().GetFormat() != "":
		return fail(n.Line, "hits_addend", "format reads Envoy's request context; give a number")
	case rl.GetHitsAddend().GetIsNegativeHits():
		// Taken as a positive number it would charge what it means to give
		// back: refuse it rather than count it the wrong way.
		return fail(n.Line, "is_negative_hits", "a refund settles a request that has ended; forward-auth asks once, before the request")
	case rl.GetApplyOnStreamDone():
		return fail(n.Line, "apply_on_stream_done", "forward-auth asks once, before the request; nothing calls it when the stream is done")
	}
	if count := len(rl.GetActions()); count > rls.MaxEntries {
		return fail(n.Line, "actions", "%d actions, above the service's %d entries a descriptor", count, rls.MaxEntries)
	}
	rule := descriptorRule{hits: rl.GetHitsAddend().GetNumber().GetValue()}
	lines := actionLines(n)
	for i, a := range rl.GetActions() {
		line := n.Line
		if i < len(lines) {
			line = lines[i]
		}
		act, err := compileAction(a)
		if err != nil {
			err.Line = line
			return descriptorRule{}, nil, err
		}
		rule.actions = append(rule.actions, act)
	}
	return rule, rl, nil
}

// actionLines are the lines of the entries of n's actions.
func actionLines(n *yaml.Node) []int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "actions" {
			var lines []int
			for _, a := range n.Content[i+1].Content {
				lines = append(lines, a.Line)
			}
			return lines
		}
	}
	return nil
}

// compileAction keeps the actions that make sense outside Envoy and
// refuses the others by name.
func compileAction(a *routev3.RateLimit_Action) (action, *Error) {
	switch x := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_RemoteAddress_:
		return action{kind: remoteAddress, key: "remote_address"}, nil
	case *routev3.RateLimit_Action_MaskedRemoteAddress_:
		m := x.MaskedRemoteAddress
		act := action{kind: maskedRemoteAddress, key: "masked_remote_address", v4Bits: 32, v6Bits: 128}
		if v := m.GetV4PrefixMaskLen(); v != nil {
			act.v4Bits = int(v.GetValue())
		}
		if v := m.GetV6PrefixMaskLen(); v != nil {
			act.v6Bits = int(v.GetValue())
		}
		return act, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		h := x.RequestHeaders
		name := strings.ToLower(h.GetHeaderName())
		return action{kind: requestHeader, key: h.GetDescriptorKey(), name: name, canon: textproto.CanonicalMIMEHeaderKey(name), skipIfAbsent: h.GetSkipIfAbsent()}, nil
	case *routev3.RateLimit_Action_QueryParameters_:
		q := x.QueryParameters
		return action{kind: queryParameter, key: q.GetDescriptorKey(), name: q.GetQueryParameterName(), skipIfAbsent: q.GetSkipIfAbsent()}, nil
	case *routev3.RateLimit_Action_GenericKey_:
		g := x.GenericKey
		key := g.GetDescriptorKey()
		if key == "" {
			key = DefaultGenericKey
		}
		return action{kind: genericKey, key: key, value: g.GetDescriptorValue()}, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		return compileHeaderValueMatch(x.HeaderValueMatch)
	}
	// Validate has made sure one action is set: name it as the file does.
	name := "action"
	if f := a.ProtoReflect().WhichOneof(a.ProtoReflect().Descriptor().Oneofs().ByName("action_specifier")); f != nil {
		name = string(f.Name())
	}
	return action{}, &Error{Word: name, Msg: "not available behind forward-auth (it reads what only Envoy knows); use remote_address, masked_remote_address, request_headers, query_parameters, generic_key or header_value_match"}
}

func compileHeaderValueMatch(h *routev3.RateLimit_Action_HeaderValueMatch) (action, *Error) {
	act := action{kind: headerValueMatch, key: h.GetDescriptorKey(), value: h.GetDescriptorValue(), expectMatch: true, defaultValue: h.GetDefaultValue()}
	if act.key == "" {
		act.key = DefaultHeaderMatchKey
	}
	if e := h.GetExpectMatch(); e != nil {
		act.expectMatch = e.GetValue()
	}
	for _, m := range h.GetHeaders() {
		hm, err := compileHeaderMatcher(m)
		if err != nil {
			return action{}, &Error{Word: "header_value_match", Msg: err.Error()}
		}
		act.matchers = append(act.matchers, hm)
	}
	return act, nil
}

// regexpOf compiles an Envoy safe_regex (RE2, which Go's regexp is) that
// must match the whole value, as Envoy's does.
func regexpOf(re string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + re + `)$`)
}
