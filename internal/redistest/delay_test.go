package redistest

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDelayProxy: a command through the proxy takes at least twice the
// delay (there and back), SetDelay changes it for a connection already
// open, and what goes through arrives whole and in order, jitter or not.
func TestDelayProxy(t *testing.T) {
	s := Start(t)
	const delay = 25 * time.Millisecond
	p := StartDelayProxy(t, s.Addr(), delay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(args ...string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		if err := c.SetDeadline(start.Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, resp(args...)); err != nil {
			t.Fatal(err)
		}
		out, err := readReply(r)
		if err != nil {
			t.Fatalf("%s through the proxy: %v", args[0], err)
		}
		return out, time.Since(start)
	}
	for _, d := range []time.Duration{delay, 3 * delay} {
		p.SetDelay(d, 0)
		for range 3 {
			if out, took := roundTrip("PING"); out != "PONG" || took < 2*d {
				t.Errorf("PING with a delay of %s: %q in %s, want PONG in %s at least", d, out, took, 2*d)
			}
		}
	}

	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: many reads
	p.SetDelay(time.Millisecond, 2*time.Millisecond)
	if out, _ := roundTrip("SET", "big", big); out != "OK" {
		t.Fatalf("SET of 1 MiB: %q", out)
	}
	if out, _ := roundTrip("GET", "big"); out != big {
		t.Fatalf("GET of 1 MiB: %d bytes back, not what was set", len(out))
	}
	// 2,000 commands in one write, the replies read as they come: each
	// INCR's reply is the next integer.
	const n = 2000
	var b strings.Builder
	for range n {
		b.WriteString(resp("INCR", "n"))
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if out, err := readReply(r); err != nil || out != strconv.Itoa(i) {
			t.Fatalf("reply %d of %d pipelined INCR: %q, %v", i, n, out, err)
		}
	}

	p.Close()
	if _, err := readReply(r); err == nil {
		t.Error("a connection through the proxy still answers after Close")
	}
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Error("the proxy accepts connections after Close")
	}
	p.Close() // idempotent
}
