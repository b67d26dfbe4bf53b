package redisstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func TestNewClientErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    ClientOptions
		want string
	}{
		{"both", ClientOptions{URL: "redis://a:6379", Cluster: []string{"b:6379"}}, "mutually exclusive"},
		{"neither", ClientOptions{}, "one of -redis-url, -redis-cluster and -redis-sentinel is required"},
		{"URL and Sentinel", ClientOptions{URL: "redis://a:6379", Sentinel: []string{"b:26379"}, SentinelMaster: "m"}, "mutually exclusive"},
		{"Sentinel without master", ClientOptions{Sentinel: []string{"b:26379"}}, "needs -redis-sentinel-master"},
		{"Sentinel CA without TLS", ClientOptions{Sentinel: []string{"a:1"}, SentinelMaster: "m", TLSCA: notPEM}, "needs TLS"},
		{"scheme", ClientOptions{URL: "http://a:6379"}, "invalid URL scheme"},
		{"db", ClientOptions{URL: "redis://a:6379/x"}, "invalid database number"},
		{"CA without TLS", ClientOptions{URL: "redis://a:6379", TLSCA: notPEM}, "needs TLS"},
		{"cluster CA without TLS", ClientOptions{Cluster: []string{"a:1"}, TLSCA: notPEM}, "needs TLS"},
		{"CA missing", ClientOptions{URL: "rediss://a:6379", TLSCA: filepath.Join(dir, "nope.pem")}, "no such file"},
		{"CA not PEM", ClientOptions{URL: "rediss://a:6379", TLSCA: notPEM}, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.o)
			if err == nil {
				_ = c.Close()
				t.Fatalf("got no error, want one mentioning %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestNewClientURLErrorHidesPassword: a malformed URL must not end up in
// logs with its password.
func TestNewClientURLErrorHidesPassword(t *testing.T) {
	_, err := NewClient(ClientOptions{URL: "redis://user:s3cret@host:port/0"})
	if err == nil {
		t.Fatal("got no error for a bad port")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestNewClientOptions(t *testing.T) {
	ca := writeCA(t)
	c, err := NewClient(ClientOptions{
		URL:      "rediss://host:6380/2?dial_timeout=3s",
		Username: "flaguser", Password: "flagpass",
		TLSCA: ca, Timeout: 80 * time.Millisecond, PoolSize: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.Addr != "host:6380" || o.DB != 2 {
		t.Errorf("addr %s db %d, want host:6380 db 2", o.Addr, o.DB)
	}
	if o.Username != "flaguser" || o.Password != "flagpass" {
		t.Errorf("credentials %q/%q, want the flags' where the URL has none", o.Username, o.Password)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "host" || o.TLSConfig.RootCAs == nil {
		t.Errorf("TLS config %+v, want ServerName host and the CA file's roots", o.TLSConfig)
	}
	if !o.ContextTimeoutEnabled {
		t.Error("ContextTimeoutEnabled is off: deadlines would not reach the socket")
	}
	if o.DialTimeout != 3*time.Second {
		t.Errorf("DialTimeout %s, want the URL's 3s", o.DialTimeout)
	}
	if o.ReadTimeout != 80*time.Millisecond || o.WriteTimeout != 80*time.Millisecond || o.PoolTimeout != 80*time.Millisecond {
		t.Errorf("read/write/pool timeouts %s/%s/%s, want 80ms", o.ReadTimeout, o.WriteTimeout, o.PoolTimeout)
	}
	if o.MaxRetries != 0 || o.DialerRetries != 1 {
		t.Errorf("MaxRetries %d, DialerRetries %d; want 0 retries and 1 dial attempt", o.MaxRetries, o.DialerRetries)
	}
	if o.PoolSize != 7 {
		t.Errorf("PoolSize %d, want 7", o.PoolSize)
	}

	// Credentials in the URL win over the flags.
	c2, err := NewClient(ClientOptions{URL: "redis://u:p@host:6379", Username: "x", Password: "y"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.(*redis.Client).Options(); o.Username != "u" || o.Password != "p" || o.TLSConfig != nil {
		t.Errorf("got %q/%q TLS %v, want the URL's u/p and no TLS", o.Username, o.Password, o.TLSConfig)
	}
	if o := c2.(*redis.Client).Options(); o.DialTimeout != DefaultTimeout || o.ReadTimeout != DefaultTimeout {
		t.Errorf("timeouts %s/%s, want DefaultTimeout", o.DialTimeout, o.ReadTimeout)
	}
}

func TestNewClientCluster(t *testing.T) {
	ca := writeCA(t)
	c, err := NewClient(ClientOptions{
		Cluster:  []string{"a:7000", "b:7001"},
		Username: "u", Password: "p", TLS: true, TLSCA: ca,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("got %T, want *redis.ClusterClient", c)
	}
	o := cc.Options()
	if len(o.Addrs) != 2 || o.Username != "u" || o.Password != "p" {
		t.Errorf("addrs %v, credentials %q/%q", o.Addrs, o.Username, o.Password)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "" || o.TLSConfig.RootCAs == nil {
		t.Errorf("TLS config %+v, want no fixed ServerName (one per node) and the CA's roots", o.TLSConfig)
	}
	if !o.ContextTimeoutEnabled || o.ReadTimeout != DefaultTimeout || o.DialerRetries != 1 {
		t.Errorf("ContextTimeoutEnabled %v, ReadTimeout %s, DialerRetries %d", o.ContextTimeoutEnabled, o.ReadTimeout, o.DialerRetries)
	}
}

// TestNewClientCredentials checks the flags' credentials against a Redis
// that requires them, with an ACL user as with a password alone.
func TestNewClientCredentials(t *testing.T) {
	srv := redistest.Start(t)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "rls", "on", ">userpass", "~*", "+@all"},
		{"CONFIG", "SET", "requirepass", "defaultpass"},
	} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		user, pass string
		ok         bool
	}{
		{"none", "", "", false},
		{"password", "", "defaultpass", true},
		{"user", "rls", "userpass", true},
		{"wrong", "rls", "defaultpass", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, ClientOptions{URL: srv.URL(), Username: tc.user, Password: tc.pass, Timeout: testTimeout})
			err := New(c, Options{}).Ping(ctx)
			if (err == nil) != tc.ok {
				t.Errorf("Ping: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// writeCA writes a self-signed CA certificate and returns its path.
func writeCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redisstore test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClientConnErrors: a pipeline whose connection cannot be prepared (its
// AUTH refused) fails each of its hits with the reason, as a store that is
// unavailable, on every kind of client NewClient builds: a single Redis, a
// Sentinel's master, a cluster refused from the start, and a cluster whose
// nodes refuse new connections once the client knows the slots. The store
// reads each command's error, so without connErrorHook a single Redis's
// and a Sentinel's hits would come back empty instead (go-redis sets such
// an error on no command of theirs).
func TestClientConnErrors(t *testing.T) {
	const user, pass = "alice", "alice-s3cret"
	users := []redistest.User{{Name: user, Password: pass}}
	single := redistest.StartWith(t, redistest.Options{Users: users})
	sen := redistest.StartSentinelWith(t, redistest.SentinelOptions{Password: pass})
	cl := redistest.StartClusterWith(t, 3, redistest.Options{Users: users})
	// The process's clock, not Redis's: the hits' pipelines alone are under
	// test.
	opts := Options{Clock: func() int64 { return time.Now().UnixMicro() }}
	// keys fall on each of the three masters of the cluster (slots 15495,
	// 3300, 7365, 11298, 15363); the other setups have one master.
	keys := []string{"{a}:k", "{b}:k", "{c}:k", "{d}:k", "{e}:k"}
	decide := func(s *Store) []limits.Result {
		hits := make([]limits.Hit, len(keys))
		for i, k := range keys {
			hits[i] = limits.Hit{Key: k, Limit: hourly(limits.FixedWindow, 10), Cost: 1}
		}
		res := make([]limits.Result, len(hits))
		s.Decide(context.Background(), hits, res)
		return res
	}
	refused := func(res []limits.Result) bool {
		for _, r := range res {
			if r.Err == nil || !strings.Contains(r.Err.Error(), "WRONGPASS") || !errors.Is(r.Err, limits.ErrUnavailable) {
				return false
			}
		}
		return true
	}
	check := func(t *testing.T, res []limits.Result) {
		t.Helper()
		if !refused(res) {
			t.Errorf("got %+v, want every hit failed with an error naming WRONGPASS, of a store unavailable", res)
		}
	}
	for _, tc := range []struct {
		name string
		o    ClientOptions
	}{
		{"single", ClientOptions{URL: single.URL(), Username: user, Password: "wrong"}},
		{"Sentinel", ClientOptions{Sentinel: sen.Addrs(), SentinelMaster: redistest.SentinelMaster, Password: "wrong"}},
		{"cluster", ClientOptions{Cluster: cl.Addrs(), Username: user, Password: "wrong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Timeout = testTimeout
			s := New(newClient(t, tc.o), opts)
			defer s.Close()
			check(t, decide(s))
		})
	}
	t.Run("cluster refusing new connections", func(t *testing.T) {
		s := New(newClient(t, ClientOptions{Cluster: cl.Addrs(), Username: user, Password: pass, Timeout: testTimeout}), opts)
		defer s.Close()
		for i, r := range decide(s) {
			if r.Err != nil || !r.Allowed {
				t.Fatalf("hit on %s before: %+v, want allowed", keys[i], r)
			}
		}
		// Deleting the user closes its connections: a pipeline that takes
		// one before the client has seen it closed fails (EOF), and the
		// next need new ones, whose AUTH is refused.
		for _, n := range cl.Nodes {
			if _, err := n.Do("ACL", "DELUSER", user); err != nil {
				t.Fatal(err)
			}
		}
		var res []limits.Result
		eventually(5*time.Second, func() bool { res = decide(s); return refused(res) })
		check(t, res)
	})
}
