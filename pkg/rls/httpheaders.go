package rls

import (
	"net/http"
	"strconv"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// The headers Envoy's rate limit filter builds from an answer's statuses
// when it is configured with enable_x_ratelimit_headers: DRAFT_VERSION_03.
const (
	HeaderXRateLimitLimit     = "X-RateLimit-Limit"
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderXRateLimitReset     = "X-RateLimit-Reset"
)

// unitSeconds is a RateLimit unit's length in seconds, as Envoy's filter
// counts it in the w= of X-RateLimit-Limit; 0 for UNKNOWN. It is the
// limits' own unit lengths (config.Unit.Duration), indexed by the unit an
// answer reports them as (responseUnits).
var unitSeconds = func() []int64 {
	s := make([]int64, len(rlsv3.RateLimitResponse_RateLimit_Unit_name))
	for u, ru := range responseUnits {
		s[ru] = int64(config.Unit(u).Duration() / time.Second)
	}
	return s
}()

// HTTPHeaders writes to h the headers that an HTTP server answering for
// resp sends its client, so that an application behind the Go client and
// a proxy behind forward-auth tell their clients what Envoy would:
//
//   - every header the service put in resp (response_headers_to_add: the
//     IETF pair with -response-headers, the drop-in's three, Retry-After),
//     replacing any of the same name already in h;
//   - X-RateLimit-Limit, -Remaining and -Reset as Envoy's rate limit
//     filter builds them from the statuses (DRAFT_VERSION_03): the status
//     with a limit and the least remaining (the first, on ties) gives the
//     limit's first value, the remaining and the reset (whole seconds,
//     truncated, as Envoy truncates); every status with a limit adds
//     `, N;w=SECONDS` and `;name="NAME"` when it has one;
//   - on OVER_LIMIT, Retry-After when the service sent none: the longest
//     wait of the statuses over their limit, in whole seconds rounded up,
//     at least 1 (a client told 0 would retry at once into the same
//     refusal).
//
// It writes nothing for an answer without statuses that carry a limit,
// beyond the service's own headers.
func HTTPHeaders(resp *rlsv3.RateLimitResponse, h http.Header) {
	for _, hv := range resp.GetResponseHeadersToAdd() {
		if k := hv.GetKey(); k != "" {
			h.Set(k, hv.GetValue())
		}
	}
	statuses := resp.GetStatuses()
	var least *rlsv3.RateLimitResponse_DescriptorStatus
	var policy []byte
	for _, st := range statuses {
		cl := st.GetCurrentLimit()
		if cl == nil {
			continue
		}
		if least == nil || st.GetLimitRemaining() < least.GetLimitRemaining() {
			least = st
		}
		var w int64
		if u := cl.GetUnit(); int(u) < len(unitSeconds) && u >= 0 {
			w = unitSeconds[u]
		}
		if w == 0 {
			continue
		}
		policy = append(policy, ", "...)
		policy = strconv.AppendUint(policy, uint64(cl.GetRequestsPerUnit()), 10)
		policy = append(policy, ";w="...)
		policy = strconv.AppendInt(policy, w, 10)
		if n := cl.GetName(); n != "" {
			policy = append(policy, ";name="...)
			policy = append(policy, sfString(n)...)
		}
	}
	if least != nil {
		limit := strconv.AppendUint(nil, uint64(least.GetCurrentLimit().GetRequestsPerUnit()), 10)
		h.Set(HeaderXRateLimitLimit, string(append(limit, policy...)))
		h.Set(HeaderXRateLimitRemaining, strconv.FormatUint(uint64(least.GetLimitRemaining()), 10))
		h.Set(HeaderXRateLimitReset, strconv.FormatInt(least.GetDurationUntilReset().GetSeconds(), 10))
	}
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT && h.Get(HeaderRetryAfter) == "" {
		h.Set(HeaderRetryAfter, strconv.FormatInt(max(ceilSeconds(RefusedWait(resp)), 1), 10))
	}
}

// RefusedWait is the longest duration_until_reset of resp's statuses over
// their limit: how long a refused client must wait for every descriptor
// that refused it to have room again. 0 when none is over.
func RefusedWait(resp *rlsv3.RateLimitResponse) time.Duration {
	var wait time.Duration
	for _, st := range resp.GetStatuses() {
		if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			wait = max(wait, st.GetDurationUntilReset().AsDuration())
		}
	}
	return wait
}
