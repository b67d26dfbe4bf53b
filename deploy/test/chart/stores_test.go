package chart

import (
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
)

// TestPodStoresDown runs the container for each Redis store the chart
// renders (Sentinel with its password, Cluster, one Redis over TLS with a
// CA and a client certificate from a mounted Secret), with no Redis there:
// the flags and mounted files are taken, the pod turns ready, and /healthz
// answers 200 with the store unreachable, so that no probe would restart a
// pod for a Redis outage.
func TestPodStoresDown(t *testing.T) {
	ca := newCA(t)
	cert, key := ca.issue(t, "envoy-rls", []string{"envoy-rls"}, nil, x509.ExtKeyUsageClientAuth)
	secrets := map[string]map[string][]byte{
		"redis":     {"redis-password": []byte("pw"), "redis-username": []byte("rls")},
		"sentinel":  {"sentinel-password": []byte("spw")},
		"redis-tls": {"ca.crt": ca.pem, "tls.crt": cert, "tls.key": key},
	}
	cases := []struct{ name, values string }{
		{"sentinel", "redis:\n  sentinel: {addrs: ['" + freeAddr(t) + "', '" + freeAddr(t) + "'], master: mymaster, existingSecret: sentinel}\n  auth: {existingSecret: redis}\n"},
		{"cluster", "redis:\n  cluster: {addrs: ['" + freeAddr(t) + "', '" + freeAddr(t) + "']}\n  auth: {existingSecret: redis, usernameKey: redis-username}\n"},
		{"TLS", "redis:\n  url: 'rediss://" + freeAddr(t) + "'\n  tls: {enabled: true, existingSecret: redis-tls, certKey: tls.crt, keyKey: tls.key}\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := decode(t, render(t, values(t, limitsValues+"replicaCount: 2\n"+c.values)))
			p := runPod(t, o, nil, secrets)
			if code, body := p.waitHealth(t, "store: unreachable"); code != http.StatusOK || !strings.Contains(body, "store: unreachable") {
				t.Errorf("/healthz %d %q, want 200 with the store unreachable", code, body)
			}
		})
	}
}

// TestPodBadLimits: limits that do not load stop the container before it
// listens, so that the startup probe never passes on them.
func TestPodBadLimits(t *testing.T) {
	o := decode(t, render(t, values(t, "limits: |\n  domain: bad\n  descriptors:\n    - key: k\n      rate_limit: {unit: fortnight, requests_per_unit: 1}\n")))
	p := runPod(t, o, nil, nil)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("envoy-rls still runs on limits that do not load")
	}
	if p.cmd.ProcessState.Success() {
		t.Error("envoy-rls exited 0 on limits that do not load")
	}
	if !strings.Contains(p.stderr.String(), "fortnight") {
		t.Errorf("its error does not name the bad unit:\n%s", p.stderr)
	}
	if _, _, err := p.healthz(); err == nil {
		t.Error("/healthz answered")
	}
}

// TestPodRedisTLS runs the container against a real redis-server that
// speaks only TLS and requires a client certificate: the CA and the
// client's certificate and key from the mounted Secret are taken, and the
// counters are kept there.
func TestPodRedisTLS(t *testing.T) {
	ca := newCA(t)
	serverCert, serverKey := ca.issue(t, "redis", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "envoy-rls", []string{"envoy-rls"}, nil, x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": ca.pem, "redis.crt": serverCert, "redis.key": serverKey}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := startRedis(t, "--tls-port", "--port", "0", "--tls-cert-file", filepath.Join(dir, "redis.crt"),
		"--tls-key-file", filepath.Join(dir, "redis.key"), "--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "yes")
	o := decode(t, render(t, values(t, limitsValues+"redis:\n  url: 'rediss://"+addr+"'\n  tls: {enabled: true, existingSecret: redis-tls, certKey: tls.crt, keyKey: tls.key}\n")))
	p := runPod(t, o, nil, map[string]map[string][]byte{"redis-tls": {"ca.crt": ca.pem, "tls.crt": clientCert, "tls.key": clientKey}})
	if code, body := p.waitHealth(t, "store: ok"); code != http.StatusOK || !strings.Contains(body, "store: ok") {
		t.Fatalf("/healthz %d %q, want Redis answering over TLS", code, body)
	}
	reachLimit(t, rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, insecure.NewCredentials())))
}
