package chart

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials"
)

// TestPodGRPCMutualTLS runs the container with gRPC mutual TLS from a
// Secret (tls.crt, tls.key, ca.crt, mounted as the kubelet mounts it): a
// client with a certificate the CA signed for the required name is
// answered, one without a certificate is not.
func TestPodGRPCMutualTLS(t *testing.T) {
	ca := newCA(t)
	serverCert, serverKey := ca.issue(t, "envoy-rls", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "envoy", []string{"envoy.example"}, nil, x509.ExtKeyUsageClientAuth)
	o := decode(t, render(t, values(t, limitsValues+"grpc:\n  tls: {enabled: true, existingSecret: grpc-tls, clientCA: true, clientSAN: envoy.example}\n")))
	p := runPod(t, o, nil, map[string]map[string][]byte{"grpc-tls": {"tls.crt": serverCert, "tls.key": serverKey, "ca.crt": ca.pem}})
	p.waitReady(t)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}})
	rl := rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, withCert))
	if got, limit := shouldRateLimit(t, rl, "chart"); got != rlsv3.RateLimitResponse_OK || limit != 2 {
		t.Errorf("with a client certificate: %v with a limit of %d, want OK with 2", got, limit)
	}
	without := rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, credentials.NewTLS(&tls.Config{RootCAs: roots})))
	if _, err := without.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: "chart"}); err == nil {
		t.Error("without a client certificate the call was answered")
	}
}

// testCA is a CA made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for the names and addresses and returns it
// and its key in PEM.
func (ca *testCA) issue(t *testing.T, cn string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}
