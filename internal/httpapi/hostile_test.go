package httpapi

import (
	"fmt"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// jsonRequest is a /json body of domain edge with the given descriptors,
// each a list of key, value pairs.
func jsonRequest(descriptors ...[]string) []byte {
	var b strings.Builder
	b.WriteString(`{"domain":"edge","descriptors":[`)
	for i, d := range descriptors {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"entries":[`)
		for j := 0; j+1 < len(d); j += 2 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":%q,"value":%q}`, d[j], d[j+1])
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// The request bounds hold on /json: one descriptor or entry too many is a
// 400 naming the bound; the bounds themselves are served.
func TestJSONRequestBounds(t *testing.T) {
	h, _ := newRLSHandler(t, fixedClock)
	ip := []string{"remote_address", "10.0.0.1"}
	entries := func(n int) []string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprint("k", i), "v")
		}
		return kv
	}
	descs := func(n int) [][]string {
		var ds [][]string
		for i := range n {
			ds = append(ds, []string{"nope", fmt.Sprint(i)})
		}
		return ds
	}
	for _, tt := range []struct {
		name     string
		body     []byte
		wantCode int
		wantBody string
	}{
		{"64 descriptors", jsonRequest(descs(rls.MaxDescriptors)...), 200, `"overallCode":"OK"`},
		{"65 descriptors", jsonRequest(descs(rls.MaxDescriptors + 1)...), 400, "65 descriptors, above the maximum of 64"},
		{"32 entries", jsonRequest(entries(rls.MaxEntries)), 200, `"overallCode":"OK"`},
		{"33 entries", jsonRequest(entries(rls.MaxEntries + 1)), 400, "descriptor 0 has 33 entries, above the maximum of 32"},
		{"33 entries in the last descriptor", jsonRequest(ip, ip, entries(rls.MaxEntries+1)), 400, "descriptor 2 has 33 entries"},
	} {
		code, _, out := postJSON(h, tt.body)
		if code != tt.wantCode || !strings.Contains(string(out), tt.wantBody) {
			t.Errorf("%s: got %d %.200q, want %d containing %q", tt.name, code, out, tt.wantCode, tt.wantBody)
		}
	}
}

// A 100 kB value on /json is decided as any other: allowed, and counted on
// a counter of its own, which the same value finds again and another long
// value (differing only in its last byte) does not.
func TestJSONLongValue(t *testing.T) {
	h, _ := newRLSHandler(t, fixedClock)
	long := strings.Repeat("a", 100_000)
	other := long[:len(long)-1] + "b"
	remaining := func(value string) (int, uint32) {
		t.Helper()
		code, _, out := postJSON(h, jsonRequest([]string{"remote_address", value}))
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%d %.200q: %v", code, out, err)
		}
		if len(resp.Statuses) != 1 || resp.Statuses[0].GetCurrentLimit().GetName() != "per-ip" {
			t.Fatalf("%d %.200q: want one status of per-ip", code, out)
		}
		return code, resp.Statuses[0].GetLimitRemaining()
	}
	// per-ip allows 3 a minute.
	for _, c := range []struct {
		value     string
		code      int
		remaining uint32
	}{
		{long, 200, 2},
		{long, 200, 1},
		{other, 200, 2},
		{long, 200, 0},
		{long, 429, 0},
		{other, 200, 1},
	} {
		if code, rem := remaining(c.value); code != c.code || rem != c.remaining {
			t.Errorf("value ending %q: got %d with %d remaining, want %d with %d", c.value[len(c.value)-3:], code, rem, c.code, c.remaining)
		}
	}
}
