package httpapi

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// DefaultBodyBudget is the bytes /json request bodies may hold at once,
// across every request, unless Options.Bodies says otherwise: 32 bodies
// of the largest size.
const DefaultBodyBudget = 32 * MaxBodyBytes

// bodyChunk is the buffer a body starts reading into: a request of the
// usual size fits in it whole, and it is what the budget keeps in reserve
// for such requests (BodyBudget).
const bodyChunk = 4 << 10

// BodyBudget bounds the bytes that request bodies hold at once, across
// every request that reads through it: a body takes its buffer's bytes
// from the budget as it grows, while it is read, and gives them back once
// it is decoded. protojson decodes only a whole message, so the body is
// held whole; the budget is what bounds a crowd of clients that send a
// large body slowly, or never finish it. A body that cannot take the
// bytes it needs is refused (ErrBodyBudget). Growth past a body's first
// chunk may not take the last quarter of the budget: that share is left
// for the first chunks, so that short requests are still read while long
// ones fill the rest. Safe for use by concurrent goroutines.
type BodyBudget struct {
	limit int64
	held  atomic.Int64
}

// NewBodyBudget returns a budget of limit bytes (at least one chunk).
func NewBodyBudget(limit int64) *BodyBudget {
	return &BodyBudget{limit: max(limit, bodyChunk)}
}

// Limit is the budget's bound in bytes.
func (b *BodyBudget) Limit() int64 { return b.limit }

// Held is the bytes the bodies being read hold now.
func (b *BodyBudget) Held() int64 { return b.held.Load() }

// ErrBodyBudget is the error of a body that the budget has no room for.
var ErrBodyBudget = errors.New("too many request bodies are being read at once")

// take takes n bytes if, once taken, at least keep bytes are left.
func (b *BodyBudget) take(n, keep int64) bool {
	for {
		h := b.held.Load()
		if h+n > b.limit-keep {
			return false
		}
		if b.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

func (b *BodyBudget) give(n int64) { b.held.Add(-n) }

// chunks are the first chunks of bodies, reused: grown buffers are left
// to the garbage collector, so that nothing keeps a large one.
var chunks = sync.Pool{New: func() any { b := make([]byte, 0, bodyChunk); return &b }}

// body is a request body read within a budget; release gives its bytes
// back, once its contents are no longer needed.
type body struct {
	b      []byte
	pooled *[]byte // the first chunk, while b is still it
	budget *BodyBudget
}

// readBody reads r whole within b. sizeHint is the length the request
// announced (-1 unknown): a shorter one starts with a smaller buffer, but
// the announced length is never taken up front, since a client may
// announce much and send little.
func (b *BodyBudget) readBody(r io.Reader, sizeHint int64) (*body, error) {
	first := int64(bodyChunk)
	if sizeHint >= 0 && sizeHint < first {
		first = sizeHint + 1 // room to read the end of the body
	}
	if !b.take(first, 0) {
		return nil, b.refusal()
	}
	bd := &body{budget: b}
	if first == bodyChunk {
		bd.pooled = chunks.Get().(*[]byte)
		bd.b = (*bd.pooled)[:0]
	} else {
		bd.b = make([]byte, 0, first)
	}
	for {
		if len(bd.b) == cap(bd.b) {
			if err := bd.grow(); err != nil {
				bd.release()
				return nil, err
			}
		}
		n, err := r.Read(bd.b[len(bd.b):cap(bd.b)])
		bd.b = bd.b[:len(bd.b)+n]
		if err == io.EOF {
			return bd, nil
		}
		if err != nil {
			bd.release()
			return nil, err
		}
	}
}

// grow doubles the buffer, up to one byte past MaxBodyBytes (the reader
// bounds the body), taking the new one's bytes before it exists and
// giving the old one's back once it is copied.
func (bd *body) grow() error {
	b := bd.budget
	size := min(int64(cap(bd.b))*2, MaxBodyBytes+1)
	if size <= int64(cap(bd.b)) {
		return fmt.Errorf("body above %d bytes", MaxBodyBytes)
	}
	if !b.take(size, b.limit/4) {
		return b.refusal()
	}
	nb := make([]byte, len(bd.b), size)
	copy(nb, bd.b)
	bd.drop()
	bd.b = nb
	return nil
}

// drop lets go of the current buffer and gives its bytes back.
func (bd *body) drop() {
	if bd.pooled != nil {
		*bd.pooled = (*bd.pooled)[:0]
		chunks.Put(bd.pooled)
		bd.pooled = nil
	}
	bd.budget.give(int64(cap(bd.b)))
	bd.b = nil
}

// release gives the body's bytes back; its contents are gone.
func (bd *body) release() {
	if bd.b != nil {
		bd.drop()
	}
}

func (b *BodyBudget) refusal() error {
	return fmt.Errorf("%w (the server holds %d bytes of bodies, its bound is %d): retry later", ErrBodyBudget, b.Held(), b.limit)
}
