package descriptors

import "testing"

// fnvReference is FNV-1a over the 8 little-endian bytes of len(s), then s,
// byte by byte: what fnvString computes faster.
func fnvReference(h uint64, s string) uint64 {
	n := uint64(len(s))
	for i := 0; i < 8; i++ {
		h ^= n & 0xff
		h *= fnvPrime
		n >>= 8
	}
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// TestFNVStringReference pins fnvString to the byte-by-byte definition over
// lengths whose bytes are zero and non-zero in every position that matters.
func TestFNVStringReference(t *testing.T) {
	big := make([]byte, 1<<17+3)
	for i := range big {
		big[i] = byte(i * 7)
	}
	lengths := []int{0, 1, 2, 9, 10, 127, 128, 129, 255, 256, 257, 511, 512, 65535, 65536, 65537, 1<<16 + 256, 1 << 17, len(big)}
	for _, n := range lengths {
		s := string(big[:n])
		for _, h := range []uint64{fnvOffset, 0, 1, 0xdeadbeefcafef00d} {
			if got, want := fnvString(h, s), fnvReference(h, s); got != want {
				t.Fatalf("len %d, h %x: fnvString %x, reference %x", n, h, got, want)
			}
			if got, want := fnvString(h, []byte(s)), fnvReference(h, s); got != want {
				t.Fatalf("len %d, h %x, bytes: fnvString %x, reference %x", n, h, got, want)
			}
		}
	}
}

func TestAppendHex64(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xf, 0x10, 0x0123456789abcdef, ^uint64(0)} {
		got := string(appendHex64([]byte("x"), v))
		want := "x" + fmtHex(v)
		if got != want {
			t.Errorf("appendHex64(%x) = %q, want %q", v, got, want)
		}
	}
}

func fmtHex(v uint64) string {
	const digits = "0123456789abcdef"
	var b []byte
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return string(b)
}
