package redispipe

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestNewClientOnePool: the pipelines share the pool of PING, so that
// -redis-pool-size bounds the connections; a pipeline_pool_size in the
// URL still wins.
func TestNewClientOnePool(t *testing.T) {
	open := func(o ClientOptions) redis.UniversalClient {
		t.Helper()
		c, err := NewClient(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := open(ClientOptions{URL: "redis://host:6379", PoolSize: 3})
	if o := c.(*redis.Client).Options(); o.PipelinePoolSize != noPipelinePool || o.PoolSize != 3 {
		t.Errorf("PipelinePoolSize %d, PoolSize %d; want %d and 3", o.PipelinePoolSize, o.PoolSize, noPipelinePool)
	}
	c = open(ClientOptions{URL: "redis://host:6379?pipeline_pool_size=4"})
	if o := c.(*redis.Client).Options(); o.PipelinePoolSize != 4 {
		t.Errorf("PipelinePoolSize %d, want the URL's 4", o.PipelinePoolSize)
	}
	cc := open(ClientOptions{Cluster: []string{"a:1"}, PoolSize: 5})
	if o := cc.(*redis.ClusterClient).Options(); o.PipelinePoolSize != noPipelinePool || o.PoolSize != 5 {
		t.Errorf("cluster PipelinePoolSize %d, PoolSize %d; want %d and 5", o.PipelinePoolSize, o.PoolSize, noPipelinePool)
	}
}

// TestSkipHostname: a Redis whose certificate does not name the address
// dialled is accepted with TLSSkipHostname alone, its chain still checked.
func TestSkipHostname(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{TLS: true, ClientCerts: true})
	files := srv.TLS()
	// A certificate that does not name the host: the chain alone is
	// checked with TLSSkipHostname.
	handshake := func(skip bool, roots *x509.CertPool) error {
		cfg := &tls.Config{RootCAs: roots, ServerName: "not-the-host.example", MinVersion: tls.VersionTLS12,
			Certificates: []tls.Certificate{redistest.KeyPair(t, files.ClientCertFile, files.ClientKeyFile)}}
		if skip {
			skipHostname(cfg)
		}
		c, err := tls.Dial("tcp", srv.Addr(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := handshake(true, files.CA.Pool()); err != nil {
		t.Errorf("skip hostname, right CA: %v", err)
	}
	if err := handshake(false, files.CA.Pool()); err == nil {
		t.Error("hostname checked: a certificate for another name was accepted")
	}
	if err := handshake(true, redistest.NewCA(t).Pool()); err == nil {
		t.Error("skip hostname, wrong CA: the chain was not checked")
	}
}
