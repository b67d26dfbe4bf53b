package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowBodies opens n connections to addr that each announce a /json body
// of MaxBodyBytes and trickle the first size bytes of it, in pieces, then
// hold the connection open. It returns once every connection has sent its
// bytes or been answered (a refusal), and reports how many were answered
// 503; close ends the connections.
func slowBodies(t *testing.T, addr string, n, size int) (refused int, close func()) {
	t.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var got503 atomic.Int64
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"domain\":\"", MaxBodyBytes)
			piece := strings.Repeat("a", 8<<10)
			for sent := 0; sent < size; sent += len(piece) {
				if _, err := io.WriteString(c, piece); err != nil {
					break // refused: the server closed the connection
				}
				time.Sleep(time.Millisecond)
			}
			// A refusal is answered at once; a body still being read is
			// not, and the short wait ends.
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode == http.StatusServiceUnavailable {
				got503.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(got503.Load()), func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// slowBodiesAttack is the attack of TestJSONSlowBodiesBounded:
// RLS_SLOW_BODIES=connections,KiB sets it larger, against the default
// budget (1000,1000 is the attack of 1,000 bodies of about 1 MiB).
func slowBodiesAttack(t *testing.T) (conns, size int, budget int64) {
	env := os.Getenv("RLS_SLOW_BODIES")
	if env == "" {
		return 200, 96 << 10, 2 << 20
	}
	var kib int
	if _, err := fmt.Sscanf(env, "%d,%d", &conns, &kib); err != nil || conns <= 0 || kib <= 0 {
		t.Fatalf("RLS_SLOW_BODIES=%q: want connections,KiB", env)
	}
	return conns, kib << 10, DefaultBodyBudget
}

// 200 connections that each trickle 96 KiB of a body and then hold it
// open hold no more than the body budget between them: the rest are
// refused with 503, and a normal client is still answered. Measured by
// the budget's own count, sampled all along, and by the heap.
func TestJSONSlowBodiesBounded(t *testing.T) {
	conns, size, budget := slowBodiesAttack(t)
	bodies := NewBodyBudget(budget)
	srv := httptest.NewServer(Handler(Options{Limiter: limiterFunc(byDomain), ConfigLines: func() []string { return nil }, Bodies: bodies}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	var maxHeld atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := bodies.Held(); h > maxHeld.Load() {
				maxHeld.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	before := heapInuse()
	refused, closeAll := slowBodies(t, addr, conns, size)
	defer closeAll()
	time.Sleep(200 * time.Millisecond) // the server reads what is in flight
	after := heapInuse()
	close(stop)
	<-sampled

	held := int64(after) - int64(before)
	t.Logf("%d slow bodies of %d KiB: heap in use grew by %d bytes, the budget held at most %d of %d, %d refused", conns, size>>10, held, maxHeld.Load(), budget, refused)
	// The connections' own buffers (net/http's 4 KiB reader and writer
	// each) come on top of the bodies: 2 MiB for 200.
	if bound := budget + int64(conns)*20<<10; held > bound {
		t.Errorf("heap in use grew by %d bytes with %d slow bodies open, want under %d", held, conns, bound)
	}
	if maxHeld.Load() > budget {
		t.Errorf("the bodies held %d bytes at once, above the budget of %d", maxHeld.Load(), budget)
	}
	if refused == 0 {
		t.Errorf("no slow body was refused, want those past the budget answered 503")
	}
	resp, err := http.Post(srv.URL+"/json", "application/json", strings.NewReader(`{"domain":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a normal client during the attack: got %d %q, want 200", resp.StatusCode, out)
	}
}

// A body refused for the budget is a 503 that says why; the bytes go back
// to the budget once each body is decoded or refused.
func TestJSONBodyBudgetRefusal(t *testing.T) {
	bodies := NewBodyBudget(64 << 10)
	h := Handler(Options{Limiter: limiterFunc(byDomain), ConfigLines: func() []string { return nil }, Bodies: bodies})
	var refusedCalls int
	hr := Handler(Options{Limiter: limiterFunc(byDomain), ConfigLines: func() []string { return nil }, Bodies: bodies, BodyRefused: func() { refusedCalls++ }})
	big := `{"domain":"` + strings.Repeat("a", 100<<10) + `"}`
	if code, body := do(t, hr, "POST", "/json", big); code != http.StatusServiceUnavailable || !strings.Contains(body, "too many request bodies") {
		t.Errorf("a body above the budget: got %d %q, want 503 saying too many request bodies", code, body)
	}
	if refusedCalls != 1 {
		t.Errorf("BodyRefused called %d times, want 1", refusedCalls)
	}
	if code, body := do(t, h, "POST", "/json", `{"domain":"`+strings.Repeat("a", 20<<10)+`"}`); code != 200 {
		t.Errorf("a body within the budget: got %d %q, want 200", code, body)
	}
	if n := bodies.Held(); n != 0 {
		t.Errorf("after the requests the budget holds %d bytes, want 0", n)
	}
}
