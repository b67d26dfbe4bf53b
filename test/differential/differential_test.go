//go:build differential

// Package differential runs envoy-rls as envoyproxy/ratelimit (the drop-in)
// beside envoyproxy/ratelimit itself, with the same environment and the
// same limits, sends both the same requests, and compares the answers
// field by field. envoyproxy/ratelimit is the specification of the drop-in,
// so any difference is a finding. It needs the peer's binary, which CI
// cannot build, so it has a build tag of its own:
//
//	PEER_RLS_BIN=/path/to/ratelimit go test -tags differential -count=1 -v ./test/differential/
//
// Build the peer from its repository with `go build ./src/service_cmd`.
package differential

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
)

// limits is a file both load: envoyproxy/ratelimit's format only. Periods
// are hours and days, so that no window ends during a run and both
// services see the same windows.
const limits = `domain: diff
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: api_key
    value: gold
    rate_limit: {name: gold, unit: day, requests_per_unit: 10}
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /health
    rate_limit: {unlimited: true}
  - key: tokens
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: route
    value: "/api/*"
    rate_limit: {name: api, unit: hour, requests_per_unit: 4}
  - key: route
    value: /api/admin
    rate_limit: {name: admin, unit: hour, requests_per_unit: 6, replaces: [{name: api}]}
  - key: dry
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    metadata: {plan: {tier: gold, extra: [1, 2]}, n: 1}
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: team
    metadata: {plan: {tier: silver, owner: ops}, m: true}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: blocked
    rate_limit: {name: closed, unit: hour, requests_per_unit: 0}
`

// env is what both services are given, as Envoy Gateway's Deployment
// gives it (file mode), with the answers' extras on.
func env(root, redisAddr string, ports [3]int) []string {
	return []string{
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_IGNOREDOTFILES=true",
		"RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=warn",
		"USE_STATSD=false",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr,
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"LIMIT_RESPONSE_HEADERS_ENABLED=true",
		"RESPONSE_DYNAMIC_METADATA=true",
		"PATH=" + os.Getenv("PATH"),
	}
}

func freePorts(t *testing.T) (ports [3]int) {
	t.Helper()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	return ports
}

// run starts bin with environ, its output in a log file that the test
// shows if it fails, and kills it when the test ends.
func run(t *testing.T, name, bin string, environ []string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = environ
	logs, err := os.Create(filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// start runs bin with env and returns a client of its gRPC port once it
// answers.
func start(t *testing.T, name, bin string, environ []string, grpcPort int) rlsv3.RateLimitServiceClient {
	t.Helper()
	run(t, name, bin, environ)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ShouldRateLimit(ctx, req(d("nothing", "x")))
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func d(kv ...string) *ratelimitv3.RateLimitDescriptor {
	out := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Entries = append(out.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func withHits(x *ratelimitv3.RateLimitDescriptor, hits uint64) *ratelimitv3.RateLimitDescriptor {
	x.HitsAddend = wrapperspb.UInt64(hits)
	return x
}

func req(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "diff", Descriptors: ds}
}

// steps are the requests, in order, each sent to both services.
func steps() []*rlsv3.RateLimitRequest {
	var s []*rlsv3.RateLimitRequest
	add := func(r *rlsv3.RateLimitRequest, times int) {
		for range times {
			s = append(s, r)
		}
	}
	add(req(d("remote_address", "10.0.0.1")), 5)                                 // over after 3; refused hits count
	add(req(d("api_key", "gold")), 2)                                            // named, exact value
	add(req(d("api_key", "k1")), 3)                                              // bare key
	add(req(d("path", "/health")), 2)                                            // unlimited
	add(req(d("tokens", "t1")), 1)                                               // Envoy Gateway's costs: a peek,
	add(req(withHits(d("tokens", "t1"), 0)), 1)                                  // a peek (hits 0)
	add(req(withHits(d("tokens", "t1"), 25)), 1)                                 // then 25 on a limit of 10,
	add(req(withHits(d("tokens", "t1"), 0)), 1)                                  // so the next peek is refused
	add(req(d("route", "/api/x")), 5)                                            // wildcard
	add(req(d("route", "/api/x"), d("route", "/api/admin")), 3)                  // replaces across descriptors
	add(req(d("dry", "a")), 3)                                                   // shadow mode
	add(req(d("quota", "q1"), d("remote_address", "10.0.0.2")), 2)               // one quota over, other fine
	add(req(d("quota", "q1"), d("quota", "q2")), 2)                              // every quota over
	add(req(d("team", "a", "user", "u")), 3)                                     // nested
	add(req(d("team", "a"), d("quota", "q3"), d("team", "b", "user", "v")), 2)   // metadata merge
	add(req(d("blocked", "b")), 2)                                               // the block rule, requests_per_unit 0
	add(req(withHits(d("blocked", "b"), 0), d("remote_address", "10.0.0.5")), 1) // a peek of it, beside a limit with room
	add(req(d("unknown", "x")), 1)                                               // no rule
	add(&rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("a", "b")}}, 1)
	add(&rlsv3.RateLimitRequest{Domain: "diff", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{d("remote_address", "10.0.0.3")}}, 2)
	over := d("remote_address", "10.0.0.4")
	over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	add(req(over), 2) // Envoy's override
	return s
}

// render is an answer as the comparison sees it: every field, headers
// sorted by name, the reset's seconds (the two clocks may straddle a second
// between the calls, so a difference of one second is reported apart).
func render(resp *rlsv3.RateLimitResponse, err error) (string, []int64) {
	if err != nil {
		return "error " + status.Code(err).String(), nil
	}
	var b strings.Builder
	var resets []int64
	fmt.Fprintf(&b, "overall=%s\n", resp.GetOverallCode())
	for i, st := range resp.GetStatuses() {
		fmt.Fprintf(&b, "  [%d] code=%s remaining=%d", i, st.GetCode(), st.GetLimitRemaining())
		if cl := st.GetCurrentLimit(); cl != nil {
			fmt.Fprintf(&b, " limit=%q %d/%s", cl.GetName(), cl.GetRequestsPerUnit(), cl.GetUnit())
		}
		if r := st.GetDurationUntilReset(); r != nil {
			resets = append(resets, r.GetSeconds())
			b.WriteString(" reset=set")
		}
		b.WriteString("\n")
	}
	var hs []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		hs = append(hs, header(h))
	}
	sort.Strings(hs)
	for _, h := range hs {
		fmt.Fprintf(&b, "  header %s\n", h)
	}
	if md := resp.GetDynamicMetadata(); md != nil {
		j, _ := protojson.MarshalOptions{}.Marshal(md)
		fmt.Fprintf(&b, "  metadata %s\n", normalizeJSON(string(j)))
	}
	return b.String(), resets
}

func header(h *corev3.HeaderValue) string {
	if strings.EqualFold(h.GetKey(), "RateLimit-Reset") {
		return h.GetKey() + ": (seconds)"
	}
	return h.GetKey() + ": " + h.GetValue()
}

// normalizeJSON drops the spaces protojson adds at random.
func normalizeJSON(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		b.WriteString(strings.ReplaceAll(sc.Text(), " ", ""))
	}
	return b.String()
}

func TestDropInAnswersAsEnvoyproxyRatelimit(t *testing.T) {
	compare(t, limits)
}

// An empty runtime directory (a ConfigMap with no keys yet) is no limits
// in both: every request allowed.
func TestDropInEmptyRuntimeDirAsEnvoyproxyRatelimit(t *testing.T) {
	compare(t, "")
}

// setup returns the peer's binary (PEER_RLS_BIN), envoy-rls built as
// bin/ratelimit, and a runtime root whose ratelimit/config holds limitsFile
// as config.yaml (nothing if it is empty).
func setup(t *testing.T, limitsFile string) (peer, ours, root string) {
	t.Helper()
	peer = os.Getenv("PEER_RLS_BIN")
	if peer == "" {
		t.Fatal("PEER_RLS_BIN must name envoyproxy/ratelimit's binary (go build ./src/service_cmd in its repository)")
	}
	dir := t.TempDir()
	ours = filepath.Join(dir, "bin", "ratelimit")
	build := exec.Command("go", "build", "-o", ours, "github.com/envoy-rls/envoy-rls/cmd/envoy-rls")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root = filepath.Join(dir, "runtime")
	if err := os.MkdirAll(filepath.Join(root, "ratelimit", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if limitsFile != "" {
		if err := os.WriteFile(filepath.Join(root, "ratelimit", "config", "config.yaml"), []byte(limitsFile), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return peer, ours, root
}

// compare starts both services on a runtime directory holding limitsFile
// (none if it is empty), each on a Redis of its own, sends both every step
// and reports each answer that differs.
func compare(t *testing.T, limitsFile string) {
	peer, ours, root := setup(t, limitsFile)
	peerPorts, ourPorts := freePorts(t), freePorts(t)
	peerRedis, ourRedis := redistest.Start(t), redistest.Start(t)
	theirs := start(t, "envoyproxy/ratelimit", peer, env(root, peerRedis.Addr(), peerPorts), peerPorts[1])
	mine := start(t, "envoy-rls", ours, env(root, ourRedis.Addr(), ourPorts), ourPorts[1])

	same, differ := 0, 0
	for i, r := range steps() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, ra := render(theirs.ShouldRateLimit(ctx, r))
		b, rb := render(mine.ShouldRateLimit(ctx, r))
		cancel()
		resetsClose := len(ra) == len(rb)
		for j := range ra {
			if j < len(rb) && (ra[j]-rb[j] > 1 || rb[j]-ra[j] > 1) {
				resetsClose = false
			}
		}
		if a == b && resetsClose {
			same++
			continue
		}
		differ++
		j, _ := protojson.Marshal(r)
		t.Errorf("step %d %s\nenvoyproxy/ratelimit:\n%s resets %v\nenvoy-rls:\n%s resets %v", i, j, a, ra, b, rb)
	}
	t.Logf("%d steps answered alike, %d differently", same, differ)
}
