package chart

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// limitsValues are limits small enough to be reached by a test: two a
// minute on the embedded store's generic_key=default.
const limitsValues = "limits:\n  domain: chart\n  descriptors:\n    - key: generic_key\n      value: default\n      rate_limit: {unit: minute, requests_per_unit: 2}\n"

// TestPodEmbedded runs the default chart's container: it turns ready on
// the probe's path, answers ShouldRateLimit over gRPC with the ConfigMap's
// limits, and reloads them, with no restart, when the ConfigMap's ..data
// symlink is swapped as the kubelet swaps it on an update; it writes
// nothing under its root.
func TestPodEmbedded(t *testing.T) {
	o := decode(t, render(t, values(t, limitsValues)))
	p := runPod(t, o, nil, nil)
	if body := p.waitReady(t); !strings.Contains(body, "store: embedded") {
		t.Errorf("/healthz %q, want the embedded store", body)
	}
	rl := rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, insecure.NewCredentials()))
	reachLimit(t, rl)

	mount := filepath.Join(p.root, mountOfConfig(t, o))
	writeVolume(t, mount, map[string][]byte{"limits.yaml": []byte(
		"domain: chart\ndescriptors:\n  - key: generic_key\n    value: default\n    rate_limit: {unit: minute, requests_per_unit: 7}\n")})
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, limit := shouldRateLimit(t, rl, "chart")
		if limit == 7 {
			if code != rlsv3.RateLimitResponse_OK {
				t.Errorf("after the reload: %v, want OK under the new limit", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the swapped ConfigMap was not reloaded within 20s: the limit is still %d", limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-p.done:
		t.Fatal("the process exited after the swap")
	default:
		if p.cmd.Process.Pid != pid {
			t.Fatal("the process was restarted")
		}
	}
}

// TestPodRedis runs the Redis chart's container (-redis-url, the password
// from a Secret in RLS_REDIS_PASSWORD) against a real redis-server that
// requires it; it shares counters there, and when Redis goes away the
// probe still answers 200 (the failure mode allows), so that no pod would
// be restarted by an outage.
func TestPodRedis(t *testing.T) {
	addr, killRedis := startRedis(t, "--port", "--requirepass", "s3cret-pass")
	_, port, _ := net.SplitHostPort(addr)

	o := decode(t, render(t, values(t, limitsValues+"    - key: generic_key\n      value: down\n      rate_limit: {unit: minute, requests_per_unit: 1}\nreplicaCount: 3\nredis:\n  url: redis://"+addr+"\n  auth: {existingSecret: redis}\n")))
	p := runPod(t, o, nil, map[string]map[string][]byte{"redis": {"redis-password": []byte("s3cret-pass")}})
	if code, body := p.waitHealth(t, "store: ok"); code != http.StatusOK || !strings.Contains(body, "store: ok") {
		t.Fatalf("/healthz %d %q, want Redis answering", code, body)
	}
	rl := rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, insecure.NewCredentials()))
	reachLimit(t, rl)
	keys, err := exec.Command("redis-cli", "-p", port, "-a", "s3cret-pass", "--no-auth-warning", "--scan", "--pattern", "rls:*").Output()
	if err != nil || len(strings.Fields(string(keys))) == 0 {
		t.Errorf("no counter under rls: in Redis (%v): %q", err, keys)
	}

	killRedis()
	code, body, err := p.healthz()
	if err != nil || code != 200 || !strings.Contains(body, "store: unreachable") {
		t.Errorf("with Redis down /healthz answers %d %q %v, want 200 and the store unreachable", code, body, err)
	}
	// generic_key=down has a limit of 1 that Redis never counted: the
	// over-limit cache cannot answer for it, the failure mode does.
	for i := range 2 {
		if got, limit := shouldRateLimit(t, rl, "chart", "down"); got != rlsv3.RateLimitResponse_OK || limit != 1 {
			t.Errorf("with Redis down, call %d: %v with a limit of %d, want OK (failure mode allow) with 1", i+1, got, limit)
		}
	}
}

// reachLimit makes the calls that reach limitsValues' limit of 2: OK, OK,
// then OVER_LIMIT, each reporting the limit.
func reachLimit(t *testing.T, rl rlsv3.RateLimitServiceClient) {
	t.Helper()
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got, limit := shouldRateLimit(t, rl, "chart"); got != want || limit != 2 {
			t.Fatalf("call %d: %v with a limit of %d a unit, want %v with 2", i+1, got, limit, want)
		}
	}
}

// startRedis starts a redis-server listening on a free port of 127.0.0.1
// (portFlag: --port, or --tls-port) with the arguments given, and stops it
// at the test's end; kill stops it sooner.
func startRedis(t *testing.T, portFlag string, args ...string) (addr string, kill func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server (make test installs it)")
	}
	addr = freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	redis := exec.Command("redis-server", append([]string{portFlag, port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, args...)...)
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { redis.Wait(); close(done) }()
	kill = func() { redis.Process.Kill(); <-done }
	t.Cleanup(kill)
	return addr, kill
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// shouldRateLimit asks for one hit of generic_key=default (or value[0]) in
// domain and returns the answer's code and its limit's requests per unit.
func shouldRateLimit(t *testing.T, rl rlsv3.RateLimitServiceClient, domain string, value ...string) (rlsv3.RateLimitResponse_Code, uint32) {
	t.Helper()
	v := "default"
	if len(value) > 0 {
		v = value[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := rl.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: 1,
		Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: v}}}}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	var limit uint32
	if s := res.GetStatuses(); len(s) == 1 {
		limit = s[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	return res.GetOverallCode(), limit
}

// mountOfConfig is the mount path of -config's volume.
func mountOfConfig(t *testing.T, o objects) string {
	t.Helper()
	c := o.container(t)
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "-config="); ok {
			if m, ok := mountOf(c, v); ok {
				return m.MountPath
			}
		}
	}
	t.Fatalf("no -config in a mount: %q", c.Args)
	return ""
}

// TestPodExistingConfigMap runs the container on a ConfigMap of the
// user's with two limits files, one domain each: both load from the
// mounted directory, whose ..data entries are not taken for files.
func TestPodExistingConfigMap(t *testing.T) {
	o := decode(t, render(t, values(t, "existingConfigMap: my-limits\n")))
	if o.configMap != nil {
		t.Fatal("a ConfigMap was rendered beside existingConfigMap")
	}
	p := runPod(t, o, map[string]map[string][]byte{"my-limits": {
		"a.yaml": []byte("domain: a\ndescriptors:\n  - key: generic_key\n    value: default\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"),
		"b.yml":  []byte("domain: b\ndescriptors:\n  - key: generic_key\n    value: default\n    rate_limit: {unit: hour, requests_per_unit: 4}\n"),
	}}, nil)
	p.waitReady(t)
	rl := rlsv3.NewRateLimitServiceClient(dial(t, p.grpcAddr, insecure.NewCredentials()))
	for domain, want := range map[string]uint32{"a": 3, "b": 4} {
		if got, limit := shouldRateLimit(t, rl, domain); got != rlsv3.RateLimitResponse_OK || limit != want {
			t.Errorf("domain %s: %v with a limit of %d, want OK with %d", domain, got, limit, want)
		}
	}
}
