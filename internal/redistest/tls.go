package redistest

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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Options configure StartWith. The zero value is the plain server of Start.
type Options struct {
	// TLS makes the server speak TLS only (no plaintext port), with a
	// certificate for 127.0.0.1, ::1 and localhost signed by CA, or by a CA
	// made for the test when CA is nil; Server.TLS has the files. Clients
	// are not asked for a certificate.
	TLS bool
	CA  *CA
	// ClientCerts makes a TLS server require a client certificate signed
	// by its CA (tls-auth-clients yes); TLSFiles.ClientCertFile and
	// ClientKeyFile are one.
	ClientCerts bool
	// Password is the default user's password (requirepass). Do
	// authenticates with it.
	Password string
	// Users are ACL users, each allowed every command and key. Their
	// passwords must not contain spaces.
	Users []User
}

// User is an ACL user of the server.
type User struct{ Name, Password string }

// TLSFiles are the PEM files of a TLS server.
type TLSFiles struct {
	// CA signed the server's certificate: what a client must trust (the
	// -redis-tls-ca flag).
	CA *CA
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate the CA
	// signed, for a server started with Options.ClientCerts.
	ClientCertFile, ClientKeyFile string
}

// StartWith starts a redis-server as Start does, with TLS or credentials.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	return start(t, o, nil)
}

// TLS returns the certificates of a server started with Options.TLS, nil
// for a plaintext one.
func (s *Server) TLS() *TLSFiles { return s.certs }

// setUp makes the certificates and the client that the options ask for.
func (s *Server) setUp(t testing.TB) {
	t.Helper()
	if s.opts.TLS {
		ca := s.opts.CA
		if ca == nil {
			ca = NewCA(t)
		}
		cert, key := ca.Issue(t, "redis-server")
		s.certs = &TLSFiles{CA: ca, CertFile: cert, KeyFile: key}
		s.client.tls = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		if s.opts.ClientCerts {
			s.certs.ClientCertFile, s.certs.ClientKeyFile = ca.Issue(t, "redis-client")
			s.client.tls.Certificates = []tls.Certificate{KeyPair(t, s.certs.ClientCertFile, s.certs.ClientKeyFile)}
		}
	}
	if s.opts.Password != "" {
		s.client.auth = []string{"AUTH", s.opts.Password}
	}
}

// listenArgs are the arguments that choose the ports, TLS and the users.
func (s *Server) listenArgs() []string {
	port := strconv.Itoa(s.port)
	var args []string
	if s.certs == nil {
		args = []string{"--port", port}
	} else {
		args = []string{
			"--port", "0",
			"--tls-port", port,
			"--tls-cert-file", s.certs.CertFile,
			"--tls-key-file", s.certs.KeyFile,
			"--tls-ca-cert-file", s.certs.CA.File,
			"--tls-auth-clients", authClients(s.opts.ClientCerts),
		}
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	for _, u := range s.opts.Users {
		args = append(args, "--user", u.Name, "on", ">"+u.Password, "~*", "&*", "+@all")
	}
	return args
}

// client is how this package talks to a server: plain TCP or TLS, with or
// without AUTH.
type client struct {
	tls  *tls.Config // nil: plain TCP
	auth []string    // the AUTH command to send first; nil: none
}

func (cl client) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if cl.tls == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, cl.tls)
}

// CA is a certificate authority made for one test, in its own temporary
// directory. It signs certificates for the loopback addresses, for servers
// and clients alike: Redis, gRPC with TLS or mutual TLS.
type CA struct {
	// File is the CA's certificate, PEM.
	File string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// certValidity bounds every certificate: long enough for any test, short
// enough that none is worth stealing.
const certValidity = 24 * time.Hour

// NewCA makes a CA and writes its certificate into a fresh t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "redistest CA " + t.Name()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("redistest: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: parse CA: %v", err)
	}
	ca := &CA{dir: t.TempDir(), cert: cert, key: key}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate signed by ca, for server and client
// authentication, valid for 127.0.0.1, ::1 and localhost, with name as its
// common name, and returns the paths of the certificate and its key (PEM).
// name must be a valid file name and unique for ca.
func (ca *CA) Issue(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("redistest: issue %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: marshal key of %s: %v", name, err)
	}
	certFile = filepath.Join(ca.dir, name+".pem")
	keyFile = filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// Pool is a certificate pool holding ca alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// KeyPair loads a certificate and key that Issue wrote, for a client's
// tls.Config.
func KeyPair(t testing.TB, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatalf("redistest: load %s: %v", certFile, err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("redistest: serial number: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

// URLWithUser is the server's URL with a user and password in it, as a
// -redis-url carries them; an empty user is the default user.
func (s *Server) URLWithUser(user, password string) string {
	u, err := url.Parse(s.URL())
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func authClients(required bool) string {
	if required {
		return "yes"
	}
	return "no"
}
