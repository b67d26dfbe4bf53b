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

// unitSeconds is the length of each unit of a current_limit, in seconds
// (month = 30 days, year = 365 days, as the limits file counts them).
var unitSeconds = map[rlsv3.RateLimitResponse_RateLimit_Unit]int64{
	rlsv3.RateLimitResponse_RateLimit_SECOND: 1,
	rlsv3.RateLimitResponse_RateLimit_MINUTE: 60,
	rlsv3.RateLimitResponse_RateLimit_HOUR:   3600,
	rlsv3.RateLimitResponse_RateLimit_DAY:    86400,
	rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

// addHeaders adds the service's own headers and 429 body to resp, as
// -response-headers and -json-429-body ask:
//
//	RateLimit-Policy: "NAME";q=REQUESTS_PER_UNIT;w=PERIOD_SECONDS
//	RateLimit: "NAME";r=REMAINING;t=RESET_SECONDS
//	Retry-After: RESET_SECONDS                      (OVER_LIMIT only)
//
// for the status that is most restrictive (mostRestrictive). A status whose
// state is unknown (its store call failed, so it took its failure mode) has
// no duration_until_reset: it gets RateLimit-Policy alone.
func (s *Service) addHeaders(resp *rlsv3.RateLimitResponse) {
	if !s.responseHeaders && !s.json429Body {
		return
	}
	over := resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT
	st := mostRestrictive(resp)
	if st == nil {
		return
	}
	cl := st.GetCurrentLimit()
	name := cl.GetName()
	if name == "" {
		name = DefaultPolicyName
	}
	var reset int64 = -1 // unknown
	if d := st.GetDurationUntilReset(); d != nil {
		reset = ceilSeconds(d.AsDuration())
	}
	if s.responseHeaders {
		period := unitSeconds[cl.GetUnit()] * int64(max(cl.GetUnitMultiplier().GetValue(), 1))
		policy := sfString(name) + ";q=" + strconv.FormatUint(uint64(cl.GetRequestsPerUnit()), 10)
		if period > 0 {
			policy += ";w=" + strconv.FormatInt(period, 10)
		}
		add(resp, HeaderRateLimitPolicy, policy)
		if reset >= 0 {
			add(resp, HeaderRateLimit, sfString(name)+";r="+strconv.FormatUint(uint64(st.GetLimitRemaining()), 10)+
				";t="+strconv.FormatInt(reset, 10))
			if over {
				add(resp, HeaderRetryAfter, strconv.FormatInt(reset, 10))
			}
		}
	}
	if s.json429Body && over {
		body := json429{Error: "rate limited", Limit: name}
		if reset >= 0 {
			body.RetryAfterSeconds = &reset
		}
		if b, err := json.Marshal(body); err == nil {
			resp.RawBody = b
			add(resp, HeaderContentType, "application/json")
		}
	}
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

// mostRestrictive picks the status the headers describe, the one Envoy's
// x-ratelimit-* headers would: on OVER_LIMIT, the refusing status with the
// longest wait; otherwise the status with a limit that has the least
// remaining. The first wins a tie; nil when no status has a limit.
func mostRestrictive(resp *rlsv3.RateLimitResponse) *rlsv3.RateLimitResponse_DescriptorStatus {
	var best *rlsv3.RateLimitResponse_DescriptorStatus
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		for _, st := range resp.GetStatuses() {
			if st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT || st.GetCurrentLimit() == nil {
				continue
			}
			if best == nil || waitOf(st) > waitOf(best) {
				best = st
			}
		}
		if best != nil {
			return best
		}
	}
	for _, st := range resp.GetStatuses() {
		if st.GetCurrentLimit() == nil {
			continue
		}
		if best == nil || st.GetLimitRemaining() < best.GetLimitRemaining() {
			best = st
		}
	}
	return best
}

// waitOf is a status's duration_until_reset; -1 when it has none (its state
// is unknown), so that any known wait is preferred.
func waitOf(st *rlsv3.RateLimitResponse_DescriptorStatus) time.Duration {
	if d := st.GetDurationUntilReset(); d != nil {
		return d.AsDuration()
	}
	return -1
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
