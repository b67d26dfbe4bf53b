package grpcguard

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// refusedAtOnce reports whether c, a connection the listener closed,
// reads its end within bound: a refused connection is sent nothing.
func refusedAtOnce(c net.Conn, bound time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(bound)) //nolint:errcheck // a net.Conn from Dial
	n, err := c.Read(make([]byte, 1))
	return n == 0 && errors.Is(err, io.EOF)
}

// Past a listener's bound a new connection is closed at once, and a closed
// one gives its place back.
func TestLimitListener(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 10)
	l := BoundListener(inner, 2, func() { refused <- struct{}{} })
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first := <-accepted
	<-accepted
	third := dial()
	select {
	case <-refused:
	case <-time.After(callBound):
		t.Fatal("the third connection was not refused")
	}
	if !refusedAtOnce(third, callBound) {
		t.Error("the refused connection was left open")
	}
	first.Close()
	first.Close() // a second Close gives nothing back twice
	dial()
	select {
	case <-accepted:
	case <-time.After(callBound):
		t.Fatal("a place given back was not taken")
	}
	dial()
	select {
	case <-refused:
	case <-time.After(callBound):
		t.Fatal("the bound did not hold after a connection closed twice")
	}
}
