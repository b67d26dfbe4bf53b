package redistest

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// DelayProxy forwards the TCP connections it accepts on a 127.0.0.1 port to
// a target address, holding what each side sends for a delay (plus a random
// jitter, if set) before passing it on: a Redis behind it is that much
// farther away, in each direction, so that a request and its reply take
// twice the delay more. The bytes of one direction keep their order, as TCP
// does: jitter spreads their delays, it never reorders them.
//
// It is stopped (the listener and every connection closed, its goroutines
// ended) when the test ends, or by Close.
type DelayProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	delay  time.Duration
	jitter time.Duration
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// delayQueue bounds the chunks of one direction in flight inside the
// proxy: past it, the proxy stops reading that side until the oldest has
// gone out, as a full TCP window does.
const delayQueue = 256

// StartDelayProxy starts a proxy to target that delays each direction by
// delay.
func StartDelayProxy(t testing.TB, target string, delay time.Duration) *DelayProxy {
	t.Helper()
	return StartDelayProxyJitter(t, target, delay, 0)
}

// StartDelayProxyJitter is StartDelayProxy with a jitter: each chunk of
// bytes is held for delay plus a random share of jitter, uniform in
// [0, jitter), and never sent before the chunk ahead of it.
func StartDelayProxyJitter(t testing.TB, target string, delay, jitter time.Duration) *DelayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: delay proxy: %v", err)
	}
	p := &DelayProxy{ln: ln, target: target, delay: delay, jitter: jitter,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay changes the delay and the jitter of the bytes read from then
// on, on the connections open and those to come.
func (p *DelayProxy) SetDelay(delay, jitter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay, p.jitter = delay, jitter
}

// Close stops accepting, closes every connection, and waits until the
// proxy's goroutines have ended. Closing a closed proxy does nothing.
func (p *DelayProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// hold is how long a chunk read now is held.
func (p *DelayProxy) hold() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.delay
	if p.jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(p.jitter)))
	}
	return d
}

// track records c as open, or closes it and reports false once the proxy
// is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *DelayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target and forwards both ways until either side
// closes; then both are closed.
func (p *DelayProxy) serve(c net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.untrack(c)
		return
	}
	if !p.track(up) {
		p.untrack(c)
		return
	}
	var both sync.WaitGroup
	both.Go(func() { p.forward(up, c) })
	both.Go(func() { p.forward(c, up) })
	both.Wait()
	p.untrack(c, up)
}

// chunk is what one read returned, and when it may go out.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst, each chunk after its hold; when src ends or
// dst fails, it closes both, which ends the other direction too.
func (p *DelayProxy) forward(dst, src net.Conn) {
	q := make(chan chunk, delayQueue)
	stop := make(chan struct{})
	var read sync.WaitGroup
	read.Go(func() {
		defer close(q)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(p.hold())
				if due.Before(last) {
					due = last // jitter never reorders
				}
				last = due
				select {
				case q <- chunk{buf[:n], due}:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	close(stop)
	_ = src.Close()
	_ = dst.Close()
	read.Wait()
}
