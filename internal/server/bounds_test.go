package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/grpcguard"
)

// closedWithin reports whether the server closes c within bound, reading
// (and discarding) whatever it sends first.
func closedWithin(t *testing.T, c net.Conn, bound time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound)) //nolint:errcheck // a net.Conn from Dial
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

// An idle keep-alive HTTP connection, and one whose body never comes, are
// closed by the server.
func TestHTTPConnectionTimeouts(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-http-idle-timeout", "300ms", "-http-read-timeout", "300ms")
	t.Run("idle keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", s.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(resp, "200") {
			t.Fatalf("first answer %q, %v", resp, err)
		}
		if !closedWithin(t, c, callBound) {
			t.Errorf("an idle keep-alive connection stayed open %s with -http-idle-timeout 300ms", callBound)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("tcp", s.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(t, c, callBound) {
			t.Errorf("a connection whose body never came stayed open %s with -http-read-timeout 300ms", callBound)
		}
	})
}

// A gRPC connection that only sent the HTTP/2 preface, and one whose calls
// are over, are closed once idle.
func TestGRPCIdleConnections(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-grpc-max-connection-idle", "300ms")
	t.Run("preface only", func(t *testing.T) {
		c, err := net.Dial("tcp", s.grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			t.Fatal(err)
		}
		if err := http2.NewFramer(c, nil).WriteSettings(); err != nil {
			t.Fatal(err)
		}
		// grpc-go drains an idle connection gracefully: GOAWAY and a ping,
		// then up to 5 s for the ping's answer, which this client never
		// sends, before it closes.
		if bound := 3 * callBound; !closedWithin(t, c, bound) {
			t.Errorf("a connection that sent only the preface stayed open %s with -grpc-max-connection-idle 300ms", bound)
		}
	})
	t.Run("after a call", func(t *testing.T) {
		conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
		if _, err := grpcCall(conn, "idle"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		defer cancel()
		for conn.GetState() == connectivity.Ready {
			if !conn.WaitForStateChange(ctx, connectivity.Ready) {
				t.Fatalf("connection still READY %s after its last call", callBound)
			}
		}
	})
}

// A request above -grpc-max-message-bytes is refused with
// RESOURCE_EXHAUSTED, at the default bound; one under it is answered.
func TestGRPCMessageBound(t *testing.T) {
	t.Parallel()
	s := startInProcess(t)
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	big := &rlsv3.RateLimitRequest{Domain: "test", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: strings.Repeat("x", 2<<20)}},
	}}}
	_, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 2 MiB request: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := grpcCall(conn, strings.Repeat("y", 100<<10)); err != nil {
		t.Errorf("a 100 kB request: %v", err)
	}
}

// Streaming calls (health Watch) last as long as their clients want, so
// they hold no place of -max-in-flight: connections holding every Watch
// stream they may do not keep one decision from being answered. They have
// a bound of their own, -max-open-streams, of which one connection holds
// at most grpcguard.StreamsPerConn.
func TestStreamsBoundApart(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-max-in-flight", "16", "-max-open-streams", fmt.Sprint(grpcguard.StreamsPerConn+4))
	greedy := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	for range grpcguard.StreamsPerConn {
		openWatch(t, greedy)
	}
	if err := watchRefused(greedy); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a Watch past a connection's %d: %v, want RESOURCE_EXHAUSTED", grpcguard.StreamsPerConn, err)
	}
	if _, err := grpcCall(greedy, "beside-watches"); err != nil {
		t.Errorf("a decision on a connection holding %d Watch streams: %v", grpcguard.StreamsPerConn, err)
	}
	other := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	for range 4 {
		openWatch(t, other)
	}
	if err := watchRefused(other); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a Watch past -max-open-streams: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := grpcCall(other, "all-streams-open"); err != nil {
		t.Errorf("a decision while every stream place is held: %v", err)
	}
}

// watchRefused opens a health Watch on conn and returns the error of its
// first answer.
func watchRefused(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = w.Recv()
	return err
}

// openWatch opens a health Watch stream on conn and reads its first
// answer; the stream ends with the cancel returned, or with the test.
func openWatch(t *testing.T, conn *grpc.ClientConn) (healthpb.Health_WatchClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	return w, cancel
}

// answeredWithin fails t unless a call on conn is answered within
// callBound, retrying while the bound refuses it.
func answeredWithin(t *testing.T, conn *grpc.ClientConn, what string) {
	t.Helper()
	deadline := time.Now().Add(callBound)
	for {
		_, err := grpcCall(conn, "after")
		if err == nil {
			return
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawCodec sends a call's message as the bytes given, so that a test can
// send one that does not decode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }
func (rawCodec) Name() string                       { return "proto" }

// Calls that end before any handler runs (a method that does not exist, a
// message that does not decode) give their place in -max-in-flight back
// too: far more of them than the bound, and a call after them is answered.
func TestMaxInFlightFailedCalls(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-max-in-flight", "2")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	for i := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), callBound)
		err := conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/NoSuchMethod", []byte{}, new([]byte), grpc.ForceCodec(rawCodec{}))
		if c := status.Code(err); c != codes.Unimplemented && c != codes.ResourceExhausted {
			t.Fatalf("call %d to a method that does not exist: %v", i, err)
		}
		err = conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", []byte{0xff, 0xff, 0xff}, new([]byte), grpc.ForceCodec(rawCodec{}))
		cancel()
		if c := status.Code(err); c != codes.Internal && c != codes.ResourceExhausted {
			t.Fatalf("call %d with a message that does not decode: %v", i, err)
		}
	}
	answeredWithin(t, conn, "after 12 failed calls")
}
