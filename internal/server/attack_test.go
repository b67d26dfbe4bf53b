package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/envoy-rls/envoy-rls/internal/grpcguard"
)

// h2Attacker is one HTTP/2 connection of an attacker, written frame by
// frame: it opens ShouldRateLimit streams whose message never comes, or
// resets them at once, and answers the server's PINGs and SETTINGS so that
// the connection never looks idle or dead.
type h2Attacker struct {
	c      net.Conn
	mu     sync.Mutex // guards w, fr, enc and hdrs
	w      *bufio.Writer
	fr     *http2.Framer
	enc    *hpack.Encoder
	hdrs   bytes.Buffer
	next   uint32
	closed chan struct{} // closed once the server has closed the connection
	resets atomic.Int64  // RST_STREAM frames received from the server
	// goAway is the last GOAWAY the server sent, nil before one.
	goAway atomic.Pointer[http2.GoAwayFrame]
}

func newH2Attacker(t *testing.T, addr string) *h2Attacker {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := &h2Attacker{c: c, w: bufio.NewWriterSize(c, 64<<10), next: 1, closed: make(chan struct{})}
	a.fr = http2.NewFramer(a.w, c)
	a.enc = hpack.NewEncoder(&a.hdrs)
	a.w.WriteString(http2.ClientPreface) //nolint:errcheck // reported by Flush
	a.fr.WriteSettings()                 //nolint:errcheck // reported by Flush
	if err := a.w.Flush(); err != nil {
		t.Fatal(err)
	}
	go a.read()
	return a
}

// read answers the server's PINGs and SETTINGS until the connection ends.
func (a *h2Attacker) read() {
	defer close(a.closed)
	fr := http2.NewFramer(nil, a.c)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			return
		}
		a.mu.Lock()
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				a.fr.WritePing(true, f.Data) //nolint:errcheck // a write error ends the reads too
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				a.fr.WriteSettingsAck() //nolint:errcheck // as above
			}
		case *http2.RSTStreamFrame:
			a.resets.Add(1)
		case *http2.GoAwayFrame:
			a.goAway.Store(f)
		}
		a.w.Flush() //nolint:errcheck // as above
		a.mu.Unlock()
	}
}

// open sends the HEADERS of a new ShouldRateLimit stream, and prefix as
// the start of its DATA if not nil; it returns the stream's id.
func (a *h2Attacker) open(prefix []byte) uint32 {
	id := a.next
	a.next += 2
	a.hdrs.Reset()
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "rls"},
		{":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		a.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) //nolint:errcheck // into a bytes.Buffer
	}
	a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: a.hdrs.Bytes(), EndHeaders: true}) //nolint:errcheck // reported by flush
	if prefix != nil {
		a.fr.WriteData(id, false, prefix) //nolint:errcheck // reported by flush
	}
	return id
}

// stall opens n streams whose message never comes (prefix as in open).
func (a *h2Attacker) stall(n int, prefix []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range n {
		a.open(prefix)
	}
	return a.w.Flush()
}

// rapidReset opens and resets streams, batch at a time and perSecond a
// second, until stop is closed, the connection ends or max streams have
// gone; it returns how many it sent.
func (a *h2Attacker) rapidReset(stop <-chan struct{}, max, batch, perSecond int) int {
	sent, start := 0, time.Now()
	for sent < max {
		if ahead := time.Duration(sent)*time.Second/time.Duration(perSecond) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
		select {
		case <-stop:
			return sent
		case <-a.closed:
			return sent
		default:
		}
		a.mu.Lock()
		for range batch {
			a.fr.WriteRSTStream(a.open(nil), http2.ErrCodeCancel) //nolint:errcheck // reported by Flush
		}
		err := a.w.Flush()
		a.mu.Unlock()
		if err != nil {
			return sent
		}
		sent += batch
	}
	return sent
}

// answerBound is how long a normal client's call may take to count as
// answered beside an attack: hundreds of times a call's usual time, so
// that only a client starved of the cores misses it.
const answerBound = time.Second

// answeredShare makes calls on a connection of its own to addr, one at a
// time, for d (at most max calls), and returns how many there were a
// second and the share answered within answerBound.
func answeredShare(t *testing.T, addr string, d time.Duration, max int) (float64, float64) {
	t.Helper()
	client := rlsv3.NewRateLimitServiceClient(grpcDial(t, addr, insecure.NewCredentials()))
	req := &rlsv3.RateLimitRequest{Domain: "test", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "normal"}},
	}}}
	calls, ok, start := 0, 0, time.Now()
	for end := start.Add(d); calls < max && time.Now().Before(end); calls++ {
		ctx, cancel := context.WithTimeout(context.Background(), answerBound)
		if _, err := client.ShouldRateLimit(ctx, req); err == nil {
			ok++
		}
		cancel()
	}
	if calls == 0 {
		return 0, 0
	}
	return float64(calls) / time.Since(start).Seconds(), float64(ok) / float64(calls)
}

// grpcPrefix200K is the 5-byte prefix of a gRPC message announcing 200 KB.
var grpcPrefix200K = []byte{0, 0, 0x03, 0x20, 0x00}

// Four connections of 1,024 streams each whose message never comes (the
// headers alone, or a prefix announcing 200 KB and nothing after), their
// PINGs answered, hold no place in -max-in-flight: a normal client beside
// them gets its answers. The server ends the stalled streams once they
// have waited grpcguard.MessageWait for their message.
func TestHeaderOnlyStreams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix []byte
	}{{"headers only", nil}, {"200 KB announced", grpcPrefix200K}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startInProcess(t)
			// A Watch stream with no deadline, its message sent, outlives
			// grpcguard.MessageWait.
			watch, _ := openWatch(t, grpcDial(t, s.grpcAddr, insecure.NewCredentials()))
			watchEnded := make(chan error, 1)
			go func() {
				_, err := watch.Recv()
				watchEnded <- err
			}()
			var attackers []*h2Attacker
			for range 4 {
				a := newH2Attacker(t, s.grpcAddr)
				if err := a.stall(1024, tc.prefix); err != nil {
					t.Fatal(err)
				}
				attackers = append(attackers, a)
			}
			time.Sleep(200 * time.Millisecond) // the server reads the streams
			rate, share := answeredShare(t, s.grpcAddr, 2*time.Second, 20_000)
			t.Logf("a normal client beside 4,096 stalled streams: %.1f%% of its calls answered, %.0f a second", 100*share, rate)
			if share < 0.9 {
				t.Errorf("%.1f%% of the calls answered beside 4,096 stalled streams, want at least 90%%", 100*share)
			}
			deadline := time.Now().Add(grpcguard.MessageWait + callBound)
			for i, a := range attackers {
				for a.resets.Load() < 1024 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if n := a.resets.Load(); n < 1024 {
					t.Errorf("attacker %d: %d of its 1,024 stalled streams ended by the server within %s", i, n, grpcguard.MessageWait+callBound)
				}
			}
			select {
			case err := <-watchEnded:
				t.Errorf("a Watch stream whose message came ended after %s: %v", grpcguard.MessageWait, err)
			default:
			}
		})
	}
}

// Four attackers opening and resetting streams (the HTTP/2 rapid reset),
// 55,000 a second each (the rate that cut a normal client from 16,000
// calls a second to 128 when reset streams kept their places), each on a
// new connection as soon as the server has closed its last one: the
// server closes each connection once past its budget of resets, and a
// normal client beside them gets its answers.
func TestRapidReset(t *testing.T) {
	t.Parallel()
	s := startInProcess(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, closed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total := 0; total < 2_000_000; {
				a := newH2Attacker(t, s.grpcAddr)
				n := a.rapidReset(stop, 500_000, 100, 55_000)
				total += n
				sent.Add(int64(n))
				a.c.Close()
				select {
				case <-stop:
					return
				case <-a.closed:
					closed.Add(1) // by the server, before the attack stopped
				}
			}
		}()
	}
	rate, share := answeredShare(t, s.grpcAddr, 3*time.Second, 50_000)
	close(stop)
	wg.Wait()
	t.Logf("a normal client beside %d streams opened and reset, %d connections closed: %.1f%% of its calls answered, %.0f a second", sent.Load(), closed.Load(), 100*share, rate)
	if share < 0.9 {
		t.Errorf("%.1f%% of the calls answered beside a rapid reset, want at least 90%%", 100*share)
	}
	// Each connection is closed within its first few thousand resets, so
	// each attacker has gone through several in the attack's seconds.
	if n := closed.Load(); n < 12 {
		t.Errorf("the server closed %d of the attackers' connections, want at least 3 for each attacker", n)
	}
}

// A connection past its budget of resets is told why before it is
// closed: a GOAWAY with ENHANCE_YOUR_CALM, naming the last stream the
// server read.
func TestRapidResetGoAway(t *testing.T) {
	t.Parallel()
	s := startInProcess(t)
	a := newH2Attacker(t, s.grpcAddr)
	stop := make(chan struct{})
	defer close(stop)
	sent := a.rapidReset(stop, 100_000, 100, 50_000)
	select {
	case <-a.closed:
	case <-time.After(callBound):
		t.Fatalf("the connection is still open %v after %d resets", callBound, sent)
	}
	f := a.goAway.Load()
	if f == nil {
		t.Fatalf("the server closed the connection after %d resets without a GOAWAY", sent)
	}
	if f.ErrCode != http2.ErrCodeEnhanceYourCalm || f.LastStreamID == 0 || f.LastStreamID >= a.next {
		t.Errorf("GOAWAY %v, last stream %d (of %d opened): want ENHANCE_YOUR_CALM and a stream the client opened", f.ErrCode, f.LastStreamID, a.next/2)
	}
}
