package grpcguard

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The scanner counts the RST_STREAM frames of a client's bytes however
// they are cut into reads, and only those: a payload that looks like a
// frame header is passed over.
func TestFrameScanner(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()                                                        //nolint:errcheck // into a bytes.Buffer
	fr.WriteRSTStream(1, http2.ErrCodeCancel)                                 //nolint:errcheck // as above
	fr.WriteData(3, false, []byte{0, 0, 4, byte(http2.FrameRSTStream), 0, 0}) //nolint:errcheck // as above
	fr.WriteRSTStream(3, http2.ErrCodeCancel)                                 //nolint:errcheck // as above
	fr.WritePing(false, [8]byte{})                                            //nolint:errcheck // as above
	fr.WriteRSTStream(5, http2.ErrCodeCancel)                                 //nolint:errcheck // as above
	all := b.Bytes()
	for _, piece := range []int{1, 2, 5, 9, 10, 24, 1000} {
		s := frameScanner{preface: len(http2.ClientPreface)}
		got := 0
		for rest := all; len(rest) > 0; {
			k := min(piece, len(rest))
			got += s.resets(rest[:k])
			rest = rest[k:]
		}
		if got != 3 {
			t.Errorf("in reads of %d bytes: %d resets, want 3", piece, got)
		}
	}
}

// The budget allows its rate a second, in bursts of as many, and no more.
func TestResetBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := resetBudget{rate: 100, tokens: 100, last: t0}
	if !b.spend(100, t0) {
		t.Fatal("a burst of the whole budget refused")
	}
	if b.spend(1, t0) {
		t.Fatal("a reset past the burst allowed")
	}
	if !b.spend(49, t0.Add(500*time.Millisecond)) {
		t.Error("half a second later, half the rate refused")
	}
	if b.spend(150, t0.Add(time.Hour)) {
		t.Error("after an hour, more than a burst allowed")
	}
}

// BenchmarkFrameScanner passes the bytes of a read of Envoy's calls: 64
// calls, each a HEADERS frame and a DATA frame of 300 bytes.
func BenchmarkFrameScanner(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	for i := range 64 {
		id := uint32(2*i + 1)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: make([]byte, 40), EndHeaders: true}) //nolint:errcheck // into a bytes.Buffer
		fr.WriteData(id, true, make([]byte, 300))                                                                 //nolint:errcheck // as above
	}
	read := buf.Bytes()
	s := frameScanner{}
	b.SetBytes(int64(len(read)))
	for b.Loop() {
		s.resets(read)
	}
}
