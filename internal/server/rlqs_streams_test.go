package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/durationpb"
)

// attackScale is $RLQS_ATTACK_SCALE (default 1): the longest attacks run
// at the full size with it raised, and at a size that stays quick
// under -race on two cores without.
func attackScale(t *testing.T) int {
	t.Helper()
	v := os.Getenv("RLQS_ATTACK_SCALE")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("RLQS_ATTACK_SCALE=%q: want a positive integer", v)
	}
	return n
}

// rlqsReport is one usage report of the test domain's bucket k=v.
func rlqsReport(v string) *rlqspb.RateLimitQuotaUsageReports {
	return &rlqspb.RateLimitQuotaUsageReports{Domain: "test", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqspb.BucketId{Bucket: map[string]string{"k": v}},
		TimeElapsed:        durationpb.New(5 * time.Second),
		NumRequestsAllowed: 10,
	}}}
}

// rlqsConns dials n connections to addr.
func rlqsConns(t *testing.T, addr string, n int) []rlqspb.RateLimitQuotaServiceClient {
	t.Helper()
	out := make([]rlqspb.RateLimitQuotaServiceClient, n)
	for i := range out {
		out[i] = rlqspb.NewRateLimitQuotaServiceClient(grpcDial(t, addr, insecure.NewCredentials()))
	}
	return out
}

// waitMetric waits up to d for s's series to read want, and returns what
// it read last.
func waitMetric(t *testing.T, s *inProcess, series, want string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := metric(t, s.httpAddr, series)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answered opens n streams spread over clients, each sending one report,
// and returns how many got an answer within callBound; the streams stay
// open until the test ends.
func answered(t *testing.T, clients []rlqspb.RateLimitQuotaServiceClient, n int) (int64, error) {
	release := make(chan struct{})
	var open sync.WaitGroup
	t.Cleanup(func() { close(release); open.Wait() })
	var ok atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		wg.Add(1)
		open.Go(func() {
			answer := sync.OnceFunc(wg.Done)
			defer answer()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timer := time.AfterFunc(callBound, cancel)
			defer timer.Stop()
			st, err := clients[i%len(clients)].StreamRateLimitQuotas(ctx)
			if err == nil {
				err = st.Send(rlqsReport(fmt.Sprint(i)))
			}
			if err == nil {
				_, err = st.Recv()
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			timer.Stop()
			ok.Add(1)
			answer()
			<-release
		})
	}
	wg.Wait()
	return ok.Load(), first
}

// Streams that send one report and are cancelled at once, thousands of
// them over a few hundred connections, each give back their place in
// -max-open-streams: rls_rlqs_streams returns to 0, and 900 new streams
// are then all answered; as after ordinary churn (report, answer,
// cancel). The receiver of such a stream used to stop on the
// cancelled context holding the report it could not hand over, and the
// handler, which did not watch the context, waited for it forever.
func TestRLQSCancelledStreamsGiveBackTheirPlaces(t *testing.T) {
	scale := attackScale(t)
	s := startInProcess(t)
	conns, perConn, rounds := 100*scale, 40, 1
	if scale > 1 {
		conns, rounds = 300, scale
	}
	clients := rlqsConns(t, s.grpcAddr, conns)
	start := time.Now()
	var wg sync.WaitGroup
	for range rounds {
		for i := range conns * perConn {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				st, err := clients[i%conns].StreamRateLimitQuotas(ctx)
				if err == nil {
					_ = st.Send(rlqsReport("a"))
				}
				cancel()
			})
		}
		wg.Wait()
	}
	t.Logf("%d streams cancelled after one report in %v", rounds*conns*perConn, time.Since(start))
	if got := waitMetric(t, s, "rls_rlqs_streams", "0", 10*time.Second); got != "0" {
		t.Fatalf("rls_rlqs_streams %s after every stream was cancelled, want 0", got)
	}
	// Ordinary churn: report, answer, cancel.
	start = time.Now()
	churn := 2000 * scale
	for i := range churn {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := clients[i%conns].StreamRateLimitQuotas(ctx)
			if err == nil && st.Send(rlqsReport("b")) == nil {
				_, _ = st.Recv()
			}
		})
	}
	wg.Wait()
	t.Logf("%d streams cancelled after an answer in %v", churn, time.Since(start))
	if got := waitMetric(t, s, "rls_rlqs_streams", "0", 10*time.Second); got != "0" {
		t.Fatalf("rls_rlqs_streams %s after every stream of the churn was cancelled, want 0", got)
	}
	n, err := answered(t, rlqsConns(t, s.grpcAddr, 60), 900)
	if n != 900 {
		t.Fatalf("%d of 900 new streams answered (first error %v), want all", n, err)
	}
	if got := metric(t, s.httpAddr, "rls_rlqs_streams"); got != "900" {
		t.Errorf("rls_rlqs_streams %s with 900 streams open, want 900", got)
	}
}

// silentStreams opens n streams spread over clients, each sending one
// report and then neither sending nor reading, until the test ends.
func silentStreams(t *testing.T, clients []rlqspb.RateLimitQuotaServiceClient, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if st, err := clients[i%len(clients)].StreamRateLimitQuotas(ctx); err == nil {
				_ = st.Send(rlqsReport("silent"))
			}
		})
	}
	wg.Wait()
}

// A new Envoy is served within 25 s while 65 connections hold 16 streams
// each (1,040, past the 1,024 places of -max-open-streams) that sent one
// report and then nothing: it closes the longest-silent of them, silent
// for two report intervals, rather than wait for -rlqs-silent-after (set
// past the test's length here, so that only the eviction can serve it).
// Such streams used to hold every place for as long as they stayed.
func TestRLQSSilentStreamsLeaveRoomForANewEnvoy(t *testing.T) {
	s := startInProcess(t, "-rlqs-silent-after", "5m")
	silentStreams(t, rlqsConns(t, s.grpcAddr, 65), 65*16)
	if got := waitMetric(t, s, "rls_rlqs_streams", "1024", 5*time.Second); got != "1024" {
		t.Fatalf("rls_rlqs_streams %s with 1,040 silent streams opened, want 1024 (every place)", got)
	}
	envoy := rlqsConns(t, s.grpcAddr, 1)[0]
	start := time.Now()
	tries := 0
	for {
		tries++
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := envoy.StreamRateLimitQuotas(ctx)
		if err == nil {
			err = st.Send(rlqsReport("new"))
		}
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		if err == nil {
			break
		}
		if time.Since(start) > 25*time.Second {
			t.Fatalf("a new Envoy refused for %v (%d tries, last %v), want served within 25s", time.Since(start), tries, err)
		}
		time.Sleep(time.Second)
	}
	t.Logf("a new Envoy served after %v, at its try %d, beside 1,040 silent streams", time.Since(start).Round(time.Millisecond), tries)
	if got := metric(t, s.httpAddr, `rls_rlqs_silent_streams_closed_total{how="evicted"}`); got == "" || got == "0" {
		t.Errorf("rls_rlqs_silent_streams_closed_total{how=\"evicted\"} %q after an eviction, want at least 1", got)
	}
}

// rlqsShare sends r on st and returns the token bucket's rate it is
// answered.
func rlqsShare(t *testing.T, st grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], r *rlqspb.RateLimitQuotaUsageReports) float64 {
	t.Helper()
	if err := st.Send(r); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	tb := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		t.Fatalf("answered %v, want a token bucket", resp)
	}
	return float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
}

// demanding is a report of bucket k=api, 100/s, asking for rate a second.
func demanding(rate uint64) *rlqspb.RateLimitQuotaUsageReports {
	r := rlqsReport("api")
	r.BucketQuotaUsages[0].NumRequestsAllowed = rate
	r.BucketQuotaUsages[0].TimeElapsed = durationpb.New(time.Second)
	return r
}

// A hundred streams from one peer address, each claiming a huge demand of
// a 100/s limit, shrink an honest Envoy's 50/s to 1/s when each stream is
// a client (the default without a TLS identity); with -rlqs-client address
// they share one client's share, and the honest Envoy, from another
// address (127.0.0.2), keeps its 50/s.
func TestRLQSStreamsOfOnePeerShareOneShare(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(limits, []byte("domain: test\ndescriptors:\n  - key: k\n    value: api\n    rate_limit: {unit: second, requests_per_unit: 100}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client          string
		atLeast, atMost float64
	}{
		{"stream", 0.9, 1.1},
		{"address", 45, 50},
	} {
		t.Run(tc.client, func(t *testing.T) {
			s := startInProcess(t, "-config", limits, "-rlqs-client", tc.client)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			greedy := rlqsConns(t, s.grpcAddr, 10)
			streams := make([]grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], 100)
			for i := range streams {
				st, err := greedy[i%len(greedy)].StreamRateLimitQuotas(ctx)
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = st
			}
			other := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return other.DialContext(ctx, "tcp", addr) }))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			honest, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got float64
			for range 2 {
				for _, st := range streams {
					rlqsShare(t, st, demanding(1_000_000))
				}
				got = rlqsShare(t, honest, demanding(50))
			}
			if got < tc.atLeast || got > tc.atMost {
				t.Errorf("-rlqs-client %s: the honest Envoy's share beside 100 greedy streams of one address: %.2f/s, want %.2f–%.2f", tc.client, got, tc.atLeast, tc.atMost)
			}
			t.Logf("-rlqs-client %s: the honest Envoy's share beside 100 greedy streams of one address: %.2f/s", tc.client, got)
		})
	}
}

// Each -rlqs-client names a stream's client from its peer: identity by the
// verified client certificate's first URI, else DNS, else IP name, and no
// name without one; address falls back to the peer's IP; stream names
// none.
func TestRLQSClientOf(t *testing.T) {
	spiffe, _ := url.Parse("spiffe://mesh/ns/edge/sa/envoy")
	verified := func(c *x509.Certificate) credentials.AuthInfo {
		return credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}}
	}
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000}
	for _, tc := range []struct {
		name, mode string
		auth       credentials.AuthInfo
		want       string
	}{
		{"a SPIFFE id", "identity", verified(&x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"envoy"}}), "uri:spiffe://mesh/ns/edge/sa/envoy"},
		{"a DNS name", "identity", verified(&x509.Certificate{DNSNames: []string{"envoy.edge"}}), "dns:envoy.edge"},
		{"an IP name", "identity", verified(&x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 1, 2, 3)}}), "ip:10.1.2.3"},
		{"no client certificate", "identity", credentials.TLSInfo{}, ""},
		{"plaintext", "identity", nil, ""},
		{"plaintext", "address", nil, "addr:10.0.0.7"},
		{"a DNS name", "address", verified(&x509.Certificate{DNSNames: []string{"envoy.edge"}}), "dns:envoy.edge"},
	} {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: addr, AuthInfo: tc.auth})
		if got := rlqsClientOf(tc.mode)(ctx); got != tc.want {
			t.Errorf("-rlqs-client %s, %s: %q, want %q", tc.mode, tc.name, got, tc.want)
		}
	}
	if rlqsClientOf("stream") != nil {
		t.Error("-rlqs-client stream names a client")
	}
}
