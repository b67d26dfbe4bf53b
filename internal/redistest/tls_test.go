package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestTLS(t *testing.T) {
	s := StartWith(t, Options{TLS: true})
	if got, err := s.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS: got %q, %v; want PONG", got, err)
	}
	if !strings.HasPrefix(s.URL(), "rediss://127.0.0.1:") {
		t.Errorf("URL() = %q, want rediss://127.0.0.1:port", s.URL())
	}
	if s.TLS() == nil || s.TLS().CA.File == "" {
		t.Fatal("TLS() has no CA file")
	}
	// Plaintext is refused: the port speaks TLS only.
	plain := client{}
	if _, err := plain.do(s.Addr(), time.Second, "PING"); err == nil {
		t.Error("plaintext PING on the TLS port succeeded")
	}
	// A client that trusts another CA refuses the server.
	other := client{tls: &tls.Config{RootCAs: NewCA(t).Pool(), MinVersion: tls.VersionTLS12}}
	_, err := other.do(s.Addr(), time.Second, "PING")
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("PING trusting another CA: %v, want an unknown authority error", err)
	}
	s.Restart()
	if _, err := s.Do("PING"); err != nil {
		t.Errorf("PING after Restart: %v", err)
	}
}

func TestCredentials(t *testing.T) {
	s := StartWith(t, Options{Password: "defaultpass", Users: []User{{"alice", "alicepass"}}})
	if got, err := s.Do("ACL", "WHOAMI"); err != nil || got != "default" {
		t.Errorf("ACL WHOAMI: got %q, %v; want default", got, err)
	}
	anon := client{}
	if _, err := anon.do(s.Addr(), time.Second, "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without AUTH: %v, want NOAUTH", err)
	}
	alice := client{auth: []string{"AUTH", "alice", "alicepass"}}
	if got, err := alice.do(s.Addr(), time.Second, "ACL", "WHOAMI"); err != nil || got != "alice" {
		t.Errorf("ACL WHOAMI as alice: got %q, %v", got, err)
	}
	if got := s.URLWithUser("alice", "p@ss:w/rd"); got != "redis://alice:p%40ss%3Aw%2Frd@"+s.Addr() {
		t.Errorf("URLWithUser = %q", got)
	}
}

func TestCAIssue(t *testing.T) {
	ca := NewCA(t)
	cert, key := ca.Issue(t, "srv")
	pair := KeyPair(t, cert, key)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("VerifyHostname(%s): %v", host, err)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("Verify for %v: %v", usage, err)
		}
	}
}
