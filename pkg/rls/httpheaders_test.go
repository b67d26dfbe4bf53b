package rls_test

import (
	"net/http"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

func limitStatus(code rlsv3.RateLimitResponse_Code, n uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, name string, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: n, Unit: unit},
		LimitRemaining:     remaining,
		DurationUntilReset: durationpb.New(reset),
	}
}

func TestHTTPHeaders(t *testing.T) {
	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
	)
	cases := []struct {
		name string
		resp *rlsv3.RateLimitResponse
		want map[string]string
	}{
		{"no statuses", &rlsv3.RateLimitResponse{OverallCode: ok}, map[string]string{}},
		{"a status without a limit", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: ok}}}, map[string]string{}},
		{"two limits, the least remaining first", &rlsv3.RateLimitResponse{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			limitStatus(ok, 100, min, "per-user", 40, 30500*time.Millisecond),
			limitStatus(ok, 10, sec, "", 3, 700*time.Millisecond),
		}}, map[string]string{
			"X-RateLimit-Limit":     `10, 100;w=60;name="per-user", 10;w=1`,
			"X-RateLimit-Remaining": "3",
			"X-RateLimit-Reset":     "0",
		}},
		{"refused: Retry-After rounded up from the longest refused wait", &rlsv3.RateLimitResponse{OverallCode: over, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			limitStatus(over, 5, min, "", 0, 12300*time.Millisecond),
			limitStatus(ok, 10, sec, "", 9, 700*time.Millisecond),
		}}, map[string]string{
			"X-RateLimit-Limit":     "5, 5;w=60, 10;w=1",
			"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset":     "12",
			"Retry-After":           "13",
		}},
		{"refused without a wait: Retry-After 1", &rlsv3.RateLimitResponse{OverallCode: over, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: over}}},
			map[string]string{"Retry-After": "1"}},
		{"the service's own headers win", &rlsv3.RateLimitResponse{OverallCode: over,
			Statuses:             []*rlsv3.RateLimitResponse_DescriptorStatus{limitStatus(over, 5, sec, "", 0, 400*time.Millisecond)},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "Retry-After", Value: "7"}, {Key: "RateLimit", Value: `"default";r=0;t=1`}},
		}, map[string]string{
			"X-RateLimit-Limit":     "5, 5;w=1",
			"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset":     "0",
			"Retry-After":           "7",
			"Ratelimit":             `"default";r=0;t=1`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			rls.HTTPHeaders(c.resp, h)
			if len(h) != len(c.want) {
				t.Errorf("headers %v, want %v", h, c.want)
			}
			for k, v := range c.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}
