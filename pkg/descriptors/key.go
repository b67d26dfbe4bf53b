package descriptors

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// KeyPrefix starts every key envoy-rls writes, so that its keys are easy to
// find, count and delete in a shared Redis.
const KeyPrefix = "rls:"

// MaxValueLen bounds a key's or value's length inside a store key. A longer
// one is replaced by its SHA-256, so that a hostile header neither escapes
// its limit (it still gets a counter of its own) nor bloats Redis.
const MaxValueLen = 128

// KeyInput is what names a counter.
type KeyInput struct {
	Domain  string
	Entries []Entry
	Limit   limits.Limit
	// Index is the limit's position in its descriptor's rate_limits list.
	Index int

	// Prefix starts the key instead of KeyPrefix (the -redis-key-prefix
	// flag); empty means KeyPrefix. CheckKeyPrefix tells whether one is
	// usable.
	Prefix string
	// HashValues replaces every entry's value by its SHA-256, whatever its
	// length (the -hash-values flag), so that the store never holds what a
	// caller sent; the hash tag is then computed over the hashes too.
	HashValues bool
}

// CheckKeyPrefix reports whether p can start a store key: it must not be
// empty (every key must stay easy to find), and must not contain a brace,
// which would move the Redis Cluster hash tag that follows it.
func CheckKeyPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("key prefix must not be empty")
	case strings.ContainsAny(p, "{}"):
		return fmt.Errorf("key prefix %q must not contain { or }: they would move the Redis Cluster hash tag", p)
	}
	return nil
}

// AppendKey appends the store key of in to dst and returns the result.
//
// The key is
//
//	rls:{TAG}:ALGO:PERIOD_US:INDEX:LEN:domain(LEN:key LEN:value)...
//
// (PERIOD_US is limits.Limit.AppendPeriod's: followed, for a limit whose
// modifier numbers its windows apart, by what that modifier adds, such as
// 2592000000000@month@Europe/Berlin.)
//
// where `rls:` is in.Prefix when set. Every string is length-prefixed (an
// over-long one, and every value when HashValues is set, is `#` and its
// hash, which no length prefix starts with), so no two different
// descriptors share a key: {a_b: c} and {a: b_c} differ. TAG, the Redis
// Cluster hash tag, is a hash of the domain and entries alone, so that all
// the keys of one descriptor (its limits, whatever their algorithm or
// period) share a slot, while different descriptors spread over the
// cluster. The hash is FNV-1a, fixed across processes and versions, so that
// every instance computes the same key.
func AppendKey(dst []byte, in KeyInput) []byte {
	dst, _ = appendKeyTag(dst, in)
	return dst
}

// Key returns the store key of in as a string.
func Key(in KeyInput) string {
	key, _ := KeyTag(in)
	return key
}

// KeyTag returns the store key of in and the hash its hash tag renders
// (limits.Hit.Tag), computed once: a store that shards keys itself takes
// the tag as a number instead of parsing it back out of the key. Every key
// of one descriptor has the same tag.
func KeyTag(in KeyInput) (key string, tag uint64) {
	var buf [256]byte
	b, tag := appendKeyTag(buf[:0], in)
	return string(b), tag
}

func appendKeyTag(dst []byte, in KeyInput) ([]byte, uint64) {
	if in.Prefix != "" {
		dst = append(dst, in.Prefix...)
	} else {
		dst = append(dst, KeyPrefix...)
	}
	tag := tagHash(in.Domain, in.Entries, in.HashValues)
	dst = append(dst, '{')
	dst = appendHex64(dst, tag)
	dst = append(dst, "}:"...)
	dst = append(dst, in.Limit.Algorithm.ShortName()...)
	dst = append(dst, ':')
	dst = in.Limit.AppendPeriod(dst)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(in.Index), 10)
	dst = append(dst, ':')
	dst = appendString(dst, in.Domain)
	for _, e := range in.Entries {
		dst = appendString(dst, e.Key)
		if in.HashValues {
			dst = appendHashed(dst, e.Value)
		} else {
			dst = appendString(dst, e.Value)
		}
	}
	return dst, tag
}

func appendString(dst []byte, s string) []byte {
	if len(s) > MaxValueLen {
		return appendHashed(dst, s)
	}
	if n := len(s); n < 10 {
		dst = append(dst, byte('0'+n), ':')
	} else {
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, ':')
	}
	return append(dst, s...)
}

// appendHashed appends `#` and the first 128 bits of the SHA-256 of s, in
// hex: the same for a value hashed because it is long as for one hashed by
// HashValues.
func appendHashed(dst []byte, s string) []byte {
	sum := valueHash(s)
	dst = append(dst, '#')
	return hex.AppendEncode(dst, sum[:])
}

// ValueHash is what stands for a value in a store key when it is hashed
// (a value longer than MaxValueLen, or every value with
// KeyInput.HashValues): the first 128 bits of its SHA-256, shown in hex
// after a `#`.
func ValueHash(s string) [16]byte { return valueHash(s) }

func valueHash(s string) [16]byte {
	sum := sha256.Sum256([]byte(s))
	return [16]byte(sum[:16])
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// tagHash hashes the length-prefixed domain and entries with FNV-1a; with
// hashValues, each value's SHA-256 (as in the key) stands for the value.
func tagHash(domain string, entries []Entry, hashValues bool) uint64 {
	h := uint64(fnvOffset)
	h = fnvString(h, domain)
	for _, e := range entries {
		h = fnvString(h, e.Key)
		if hashValues {
			sum := valueHash(e.Value)
			h = fnvString(h, sum[:])
		} else {
			h = fnvString(h, e.Value)
		}
	}
	return h
}

// fnvPrimePow[k] is fnvPrime to the k-th power (mod 2^64): k zero bytes
// hashed in a row, since xoring a zero byte changes nothing.
var fnvPrimePow = func() (p [9]uint64) {
	p[0] = 1
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1] * fnvPrime
	}
	return p
}()

// fnvString adds the length of s (8 bytes, little endian), then s, to the
// FNV-1a hash h. The zero high bytes of the length, all but one or two for
// any real string, are one multiplication together.
func fnvString[S ~string | ~[]byte](h uint64, s S) uint64 {
	n := uint64(len(s))
	i := 0
	for ; n != 0; i++ {
		h ^= n & 0xff
		h *= fnvPrime
		n >>= 8
	}
	h *= fnvPrimePow[8-i]
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func appendHex64(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return append(dst, b[:]...)
}
