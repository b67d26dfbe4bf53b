package main

import (
	"context"
	"strconv"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// holdPair is one decision of a holds domain (-hold): req reserved under a
// new id and, if admitted, settled at once with the same cost, as Envoy's
// request path and its stream done would. It answers the reserve's
// response, or the settle's error: the pair's CPU is what a request with a
// hold costs beside a plain decision.
func (l *loadRun) holdPair(ctx context.Context, client rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	id := "b" + strconv.FormatUint(l.ids.Add(1), 36)
	resp, err := client.ShouldRateLimit(ctx, withEntries(req, l.c.hold, id, ""))
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		return resp, err
	}
	if _, err := client.ShouldRateLimit(ctx, withEntries(req, l.c.hold, id, l.c.settle)); err != nil {
		return nil, err
	}
	return resp, nil
}

// withEntries is req with its descriptor's entries followed by hold=id
// and, if settle is set, settle=true.
func withEntries(req *rlsv3.RateLimitRequest, hold, id, settle string) *rlsv3.RateLimitRequest {
	d := req.Descriptors[0]
	entries := make([]*ratelimitv3.RateLimitDescriptor_Entry, 0, len(d.Entries)+2)
	entries = append(entries, d.Entries...)
	entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: hold, Value: id})
	if settle != "" {
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: settle, Value: "true"})
	}
	return &rlsv3.RateLimitRequest{
		Domain:      req.Domain,
		HitsAddend:  req.HitsAddend,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: entries, HitsAddend: d.HitsAddend}},
	}
}
