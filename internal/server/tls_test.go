package server

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// TestKeyPairReload: a renewed certificate in a Kubernetes Secret volume is
// served without a restart; a broken pair keeps the last good one.
func TestKeyPairReload(t *testing.T) {
	ca := redistest.NewCA(t)
	pair := func(cert, key string) map[string]string {
		t.Helper()
		files := make(map[string]string)
		for name, from := range map[string]string{"tls.crt": cert, "tls.key": key} {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = string(b)
		}
		return files
	}
	c1, k1 := ca.Issue(t, "one")
	vol := newSecretVolume(t, pair(c1, k1))
	core, logs := observer.New(zapcore.InfoLevel)
	g, err := newGRPCTLS(&Options{
		grpcTLSCert: filepath.Join(vol.dir, "tls.crt"),
		grpcTLSKey:  filepath.Join(vol.dir, "tls.key"),
	}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	g.run(ctx, &wg)
	served := func() *tls.Certificate {
		t.Helper()
		c, err := g.config.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got, want := served().Leaf.Subject.CommonName, "one"; got != want {
		t.Fatalf("served the certificate of %q, want %q", got, want)
	}

	c2, k2 := ca.Issue(t, "two")
	vol.publish(pair(c2, k2))
	eventually(t, "the renewed certificate is served", func() bool {
		return served().Leaf.Subject.CommonName == "two"
	})
	second := served()

	// Half a rotation: the new certificate with the old key.
	c3, _ := ca.Issue(t, "three")
	vol.publish(pair(c3, k2))
	const refused = "gRPC TLS certificate not reloaded, keeping the last good one"
	eventually(t, "the mismatched pair is refused", func() bool { return logs.FilterMessage(refused).Len() > 0 })
	if got := served(); got != second {
		t.Errorf("a mismatched pair replaced the last good certificate: serving %q", got.Leaf.Subject.CommonName)
	}
	if got := logs.FilterMessage(refused).Len(); got != 1 {
		t.Errorf("warnings: got %d, want one about the pair that did not load; logs %v", got, logs.All())
	}
	if got := logs.FilterMessage("gRPC TLS certificate reloaded").Len(); got != 1 {
		t.Errorf("reloads logged: got %d, want 1 (the renewal)", got)
	}
}
