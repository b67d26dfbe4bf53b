package server

import (
	"context"
	"net"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// newRLQS makes the RLQS service of -rlqs, nil when it is off. It reads
// the config in force from the RLS service, so that a reload (files or
// xDS) reaches both; with Redis the demands are shared under
// -redis-key-prefix, so that every instance divides among all Envoys.
func newRLQS(o *Options, svc *rls.Service, store *storeHandle, m *metrics.Metrics, log *zap.Logger) (*rlqs.Service, error) {
	if !o.rlqs {
		return nil, nil
	}
	ro := rlqs.Options{
		ReportInterval:   o.rlqsReportInterval,
		AssignmentTTL:    o.rlqsAssignmentTTL,
		SilentAfter:      o.rlqsSilentAfter,
		ClientOf:         rlqsClientOf(o.rlqsClient),
		MaxStreamBuckets: o.rlqsMaxStreamBuckets,
		MaxBuckets:       o.rlqsMaxBuckets,
		Logger:           log.Named("rlqs"),
	}
	if store.redis != nil {
		ro.Store = redisdemand.New(store.redis, o.redisKeyPrefix)
	}
	q, err := rlqs.New(svc.Index, ro)
	if err != nil {
		return nil, err
	}
	m.Registry.MustRegister(q.Collector())
	return q, nil
}

// rlqsClientOf names the client of an RLQS stream as -rlqs-client says:
// nil for stream (each stream a client of its own), the verified TLS
// client certificate's name for identity, and that or the peer's IP
// address for address. Without a name, a stream is a client of its own.
func rlqsClientOf(mode string) func(context.Context) string {
	switch mode {
	case "identity":
		return tlsIdentity
	case "address":
		return func(ctx context.Context) string {
			if id := tlsIdentity(ctx); id != "" {
				return id
			}
			p, ok := peer.FromContext(ctx)
			if !ok || p.Addr == nil {
				return ""
			}
			host, _, err := net.SplitHostPort(p.Addr.String())
			if err != nil {
				return ""
			}
			return "addr:" + host
		}
	}
	return nil
}

// tlsIdentity is the first name of the stream's verified TLS client
// certificate, a URI (a SPIFFE id) before a DNS name before an IP address;
// "" without mutual TLS.
func tlsIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return ""
	}
	cert := info.State.VerifiedChains[0][0]
	switch {
	case len(cert.URIs) > 0:
		return "uri:" + cert.URIs[0].String()
	case len(cert.DNSNames) > 0:
		return "dns:" + cert.DNSNames[0]
	case len(cert.IPAddresses) > 0:
		return "ip:" + cert.IPAddresses[0].String()
	}
	return ""
}
