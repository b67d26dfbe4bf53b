package descriptors

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

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
}

// AppendKey appends the store key of in to dst and returns the result.
//
// The key is
//
//	rls:{TAG}:ALGO:PERIOD_US:INDEX:LEN:domain(LEN:key LEN:value)...
//
// Every string is length-prefixed (an over-long one is `#` and its hash,
// which no length prefix starts with), so no two different descriptors share
// a key: {a_b: c} and {a: b_c} differ. TAG, the Redis Cluster hash tag, is a
// hash of the domain and entries alone, so that all the keys of one
// descriptor (its limits, whatever their algorithm or period) share a slot,
// while different descriptors spread over the cluster. The hash is FNV-1a,
// fixed across processes and versions, so that every instance computes the
// same key.
func AppendKey(dst []byte, in KeyInput) []byte {
	dst = append(dst, KeyPrefix...)
	dst = append(dst, '{')
	dst = appendHex64(dst, tagHash(in.Domain, in.Entries))
	dst = append(dst, "}:"...)
	dst = append(dst, in.Limit.Algorithm.ShortName()...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, in.Limit.PeriodMicros(), 10)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(in.Index), 10)
	dst = append(dst, ':')
	dst = appendString(dst, in.Domain)
	for _, e := range in.Entries {
		dst = appendString(dst, e.Key)
		dst = appendString(dst, e.Value)
	}
	return dst
}

// Key returns the store key of in as a string.
func Key(in KeyInput) string {
	var buf [256]byte
	return string(AppendKey(buf[:0], in))
}

func appendString(dst []byte, s string) []byte {
	if len(s) > MaxValueLen {
		sum := sha256.Sum256([]byte(s))
		dst = append(dst, '#')
		return hex.AppendEncode(dst, sum[:16])
	}
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, ':')
	return append(dst, s...)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// tagHash hashes the length-prefixed domain and entries with FNV-1a.
func tagHash(domain string, entries []Entry) uint64 {
	h := uint64(fnvOffset)
	h = fnvString(h, domain)
	for _, e := range entries {
		h = fnvString(h, e.Key)
		h = fnvString(h, e.Value)
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
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

func appendHex64(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[(v>>uint(shift))&0xf])
	}
	return dst
}
