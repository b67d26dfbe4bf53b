package xdstest

import (
	"crypto/tls"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// MTLS is a CA with an xDS server's certificate and a client's, as Envoy
// Gateway issues them for its rate limit service.
type MTLS struct {
	CA                    *redistest.CA
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewMTLS issues the server's certificate for "xds-server" and the
// client's for client.
func NewMTLS(t testing.TB, client string) *MTLS {
	m := &MTLS{CA: redistest.NewCA(t)}
	m.ServerCert, m.ServerKey = m.CA.Issue(t, "xds-server")
	m.ClientCert, m.ClientKey = m.CA.Issue(t, client)
	return m
}

// ServerTLS is the server's side: TLS 1.3 only, a client certificate
// signed by clientCAs required.
func (m *MTLS) ServerTLS(t testing.TB, clientCAs *redistest.CA) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{redistest.KeyPair(t, m.ServerCert, m.ServerKey)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs.Pool(),
	}
}
