package xds

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS is how the client reaches the server over TLS: the files it reads,
// and the name it checks the server's certificate against. The files are
// read again at every connection attempt, so that a renewed certificate
// (a Kubernetes Secret updated in place) is used from the next connection
// on without a restart.
type TLS struct {
	// CertFile and KeyFile are the client's certificate (chain) and key,
	// PEM, for a server that requires mutual TLS, as Envoy Gateway's
	// does; both or neither.
	CertFile, KeyFile string
	// CAFile holds the PEM certificates of the CAs that may sign the
	// server's certificate; empty trusts the system's roots.
	CAFile string
	// ServerName is the name the server's certificate must carry (a DNS
	// name or an IP address in its SANs); empty is the host of
	// Options.Server.
	ServerName string
}

// Config reads the files into a client tls.Config. Its errors name the
// file at fault.
func (t *TLS) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	if t.CertFile != "" {
		kp, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s, key %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server CA %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}
