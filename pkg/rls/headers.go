package rls

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The headers the service sends itself, with -response-headers: the pair
// of the IETF draft "RateLimit header fields for HTTP"
// (draft-ietf-httpapi-ratelimit-headers), and Retry-After on a refusal.
const (
	HeaderRateLimitPolicy = "RateLimit-Policy"
	HeaderRateLimit       = "RateLimit"
	HeaderRetryAfter      = "Retry-After"
	HeaderContentType     = "content-type"

	// DefaultPolicyName names the policy of a limit without a name.
	DefaultPolicyName = "default"
)

// A HeaderDialect is one way of telling a client its limit in an answer
// (Options.Headers): the IETF draft's fields, a JSON body on a refusal, or
// envoyproxy/ratelimit's three headers. The service is given its dialects
// once; every answer runs the same list, in its order.
type HeaderDialect interface {
	// add writes the dialect's part of the answer to plan p; refused
	// reports that the overall code is OVER_LIMIT.
	add(resp *rlsv3.RateLimitResponse, p *plan, refused bool)
}

// The dialects.
var (
	// IETFHeaders adds RateLimit-Policy and RateLimit, and Retry-After on
	// OVER_LIMIT (-response-headers): ietfHeaders.
	IETFHeaders HeaderDialect = ietfHeaders{}
	// JSON429Body gives an OVER_LIMIT answer a small JSON raw_body and a
	// content-type: application/json header (-json-429-body): jsonBody.
	JSON429Body HeaderDialect = jsonBody{}
)

// RatelimitHeaders is envoyproxy/ratelimit's dialect under these names
// (-ratelimit-headers; LIMIT_RESPONSE_HEADERS_ENABLED and LIMIT_*_HEADER
// in the drop-in): ratelimitHeaders.
func RatelimitHeaders(names RatelimitHeaderNames) HeaderDialect { return ratelimitHeaders(names) }

// ietfHeaders are the fields of the IETF draft, for the descriptor that
// is most restrictive (plan.mostRestrictive):
//
//	RateLimit-Policy: "NAME";q=REQUESTS_PER_UNIT;w=WINDOW_SECONDS
//	RateLimit: "NAME";r=REMAINING;t=RESET_SECONDS
//	Retry-After: RESET_SECONDS                      (OVER_LIMIT only)
//
// WINDOW_SECONDS is the window's length at the answer's instant
// (verdict.window): the period, or the real length of the window a
// modifier makes the limit count in.
// A descriptor whose state is unknown (its store call failed, so it took
// its failure mode) gets RateLimit-Policy alone.
type ietfHeaders struct{}

func (ietfHeaders) add(resp *rlsv3.RateLimitResponse, p *plan, over bool) {
	d, name, reset := described(p, over)
	if d == nil {
		return
	}
	v := &d.verdict
	policy := sfString(name) + ";q=" + strconv.FormatUint(uint64(clampUint32(v.rule.Limit.Requests)), 10)
	if period := int64(v.window / time.Second); period > 0 {
		policy += ";w=" + strconv.FormatInt(period, 10)
	}
	add(resp, HeaderRateLimitPolicy, policy)
	if reset >= 0 {
		add(resp, HeaderRateLimit, sfString(name)+";r="+strconv.FormatUint(uint64(clampUint32(v.remaining)), 10)+
			";t="+strconv.FormatInt(reset, 10))
		if over {
			add(resp, HeaderRetryAfter, strconv.FormatInt(reset, 10))
		}
	}
}

// jsonBody gives a refusal a small JSON raw_body (json429) that names the
// most restrictive descriptor's limit, and a content-type header.
type jsonBody struct{}

func (jsonBody) add(resp *rlsv3.RateLimitResponse, p *plan, over bool) {
	if !over {
		return
	}
	d, name, reset := described(p, over)
	if d == nil {
		return
	}
	body := json429{Error: "rate limited", Limit: name}
	if reset >= 0 {
		body.RetryAfterSeconds = &reset
	}
	if b, err := json.Marshal(body); err == nil {
		resp.RawBody = b
		add(resp, HeaderContentType, "application/json")
	}
}

// described is the descriptor the service's own headers and body describe
// (plan.mostRestrictive), its limit's policy name, and its reset in whole
// seconds, -1 when unknown; a nil descriptor when none has a limit.
func described(p *plan, over bool) (d *planned, name string, reset int64) {
	d = p.mostRestrictive(over)
	if d == nil {
		return nil, "", -1
	}
	v := &d.verdict
	name = v.rule.Name
	if name == "" {
		name = DefaultPolicyName
	}
	reset = -1
	if v.known {
		reset = ceilSeconds(v.wait)
	}
	return d, name, reset
}

// json429 is the body of a refusal with -json-429-body.
type json429 struct {
	Error string `json:"error"`
	// RetryAfterSeconds is left out when the wait is unknown (a store
	// failure refused the request: failure_mode deny).
	RetryAfterSeconds *int64 `json:"retry_after_seconds,omitempty"`
	Limit             string `json:"limit"`
}

func add(resp *rlsv3.RateLimitResponse, key, value string) {
	resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: key, Value: value})
}

// ceilSeconds is d in whole seconds, rounded up; never negative.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString renders s as a structured-field String (RFC 9651 §3.3.3):
// quoted, with `"` and `\` escaped. A String holds printable ASCII only, so
// any other byte (a name in UTF-8, a control character) becomes `?`.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			// A multi-byte rune becomes one `?`, not one per byte.
			if c >= 0xc0 || c < 0x80 {
				b.WriteByte('?')
			}
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// RatelimitHeaderNames name envoyproxy/ratelimit's three headers
// (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER).
type RatelimitHeaderNames struct {
	Limit, Remaining, Reset string
}

// DefaultRatelimitHeaderNames are envoyproxy/ratelimit's defaults, the
// names of an older draft of the IETF headers.
var DefaultRatelimitHeaderNames = RatelimitHeaderNames{
	Limit:     "RateLimit-Limit",
	Remaining: "RateLimit-Remaining",
	Reset:     "RateLimit-Reset",
}

// ratelimitHeaders are envoyproxy/ratelimit's headers, under these names,
// for the descriptor it would describe: the one with a limit and the least
// remaining (the first, on ties), unless a descriptor over its limit, not
// in quota mode, comes later: the last of those then. The reset is the
// descriptor's duration_until_reset in whole seconds, rounded up.
type ratelimitHeaders RatelimitHeaderNames

func (names ratelimitHeaders) add(resp *rlsv3.RateLimitResponse, p *plan, _ bool) {
	var pick *verdict
	for i := range p.descs {
		v := &p.descs[i].verdict
		switch {
		case v.rule == nil:
		case v.over && !v.quota:
			pick = v
		case pick == nil || v.remaining < pick.remaining && !(pick.over && !pick.quota):
			pick = v
		}
	}
	if pick == nil {
		return
	}
	add(resp, names.Limit, strconv.FormatUint(uint64(clampUint32(pick.rule.Limit.Requests)), 10))
	remaining := pick.remaining
	if pick.over && !pick.quota {
		remaining = 0
	}
	add(resp, names.Remaining, strconv.FormatUint(uint64(clampUint32(remaining)), 10))
	reset := int64(0)
	if pick.known {
		reset = ceilSeconds(pick.wait)
	}
	add(resp, names.Reset, strconv.FormatInt(reset, 10))
}
