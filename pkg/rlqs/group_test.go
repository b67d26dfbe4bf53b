package rlqs

import (
	"context"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// byHeader names a stream's client by its x-client header, standing for
// a TLS client certificate's name or a peer address.
func byHeader(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, "x-client"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// dialAs opens a stream as client name (none when empty).
func dialAs(t *testing.T, conn *grpc.ClientConn, name string) *envoy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if name != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-client", name)
	}
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return &envoy{t: t, stream: st, cancel: cancel}
}

// Ten streams of one client claiming a huge demand of the 100/s bucket
// share one client's share: an honest Envoy asking 50/s keeps its 50/s,
// where with each stream a client it got 100/11 (9/s). When nine of the
// ten leave, the group's demand is the last one's, not gone: the honest
// Envoy still gets 50/s, not the whole limit.
func TestStreamsOfOneClientShareItsShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		clientOf func(context.Context) string
		honest   float64 // the honest Envoy's share, at most
		atLeast  float64
	}{
		{"each stream a client", nil, 10, 8},
		{"grouped by name", byHeader, 50, 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, Options{ReportInterval: time.Second, ClientOf: tc.clientOf})
			conn := serve(t, svc)
			honest := dialAs(t, conn, "")
			greedy := make([]*envoy, 10)
			for i := range greedy {
				greedy[i] = dialAs(t, conn, "greedy")
			}
			round := func(greedy []*envoy) (honestShare, greedySum float64) {
				for _, g := range greedy {
					g.report(usage{bucket: api(), allowed: 100, denied: 1_000_000, elapsed: time.Second})
				}
				honestShare = perSecond(tokens(t, honest.report(usage{bucket: api(), allowed: 50, elapsed: time.Second})[0]))
				for _, g := range greedy {
					greedySum += perSecond(tokens(t, g.report(usage{bucket: api(), allowed: 100, denied: 1_000_000, elapsed: time.Second})[0]))
				}
				return honestShare, greedySum
			}
			round(greedy)
			h, g := round(greedy)
			if h < tc.atLeast || h > tc.honest {
				t.Errorf("the honest Envoy's share beside ten greedy streams: %.2f/s, want %.0f–%.0f", h, tc.atLeast, tc.honest)
			}
			if h+g > 100 {
				t.Errorf("shares sum to %.2f/s, over the limit of 100", h+g)
			}
			if tc.clientOf == nil {
				return
			}
			for _, e := range greedy[1:] {
				e.leave()
			}
			waitFor(t, func() bool { return svc.Stats().Streams.Load() == 2 })
			if h := perSecond(tokens(t, honest.report(usage{bucket: api(), allowed: 50, elapsed: time.Second})[0])); h < tc.atLeast || h > tc.honest {
				t.Errorf("the honest Envoy's share after nine of the group left: %.2f/s, want %.0f–%.0f (the group's demand kept)", h, tc.atLeast, tc.honest)
			}
			if g := perSecond(tokens(t, greedy[0].report(usage{bucket: api(), allowed: 100, denied: 1_000_000, elapsed: time.Second})[0])); g < 45 || g > 50 {
				t.Errorf("the group's last stream: %.2f/s, want the group's 50", g)
			}
			greedy[0].leave()
			waitFor(t, func() bool { return svc.Stats().Streams.Load() == 1 })
			svc.groupsMu.Lock()
			defer svc.groupsMu.Unlock()
			if len(svc.groups) != 0 {
				t.Errorf("%d groups left after the last stream of the only one", len(svc.groups))
			}
		})
	}
}
