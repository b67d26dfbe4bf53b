package httpapi

import (
	"fmt"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// jsonSeeds are /json bodies, good and bad, for FuzzJSON.
func jsonSeeds() []string {
	entry := `{"key":"remote_address","value":"10.0.0.1"}`
	desc := `{"entries":[` + entry + `]}`
	descs := func(n int) string { return strings.TrimSuffix(strings.Repeat(desc+",", n), ",") }
	entries := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":"k%d","value":"v"}`, i)
		}
		return b.String()
	}
	return []string{
		// Good.
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k1"}]}]}`,
		`{"domain":"edge","descriptors":[` + desc + `]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/api/v1"},{"key":"user","value":"bob"}]},{"entries":[{"key":"path","value":"/healthz"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"t-1"}]},{"entries":[{"key":"tenant","value":"t-2"}]},{"entries":[{"key":"tenant","value":"t-3"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"shadow","value":"s"}]},{"entries":[{"key":"quota","value":"q"}]},{"entries":[{"key":"strict","value":"x"}]}],"hitsAddend":2}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"plan","value":"gold"}]},` + desc + `]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"charged","value":"c"}],"hitsAddend":"7"}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hitsAddend":0}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hitsAddend":"3","isNegativeHits":true}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hitsAddend":"18446744073709551615"}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k2"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"nope","value":"x"}],"limit":{"requestsPerUnit":4294967295,"unit":"YEAR","unitMultiplier":4294967295}}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k3"}],"limit":{"requestsPerUnit":5,"unit":"SECOND","unitMultiplier":30}}]}`,
		`{"domain":"other","descriptors":[` + desc + `]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"` + strings.Repeat("x", 200) + `"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"\u00e9\ud83d\ude00\u0000"}]}]}`,
		`{"domain":"edge","descriptors":[` + descs(64) + `]}`,
		`{"domain":"edge","descriptors":[{"entries":[` + entries(32) + `]}]}`,
		`{"domain":"edge","descriptors":[` + desc + `],"hitsAddend":4294967295}`,
		// Refused by the service: 400.
		`{"domain":"edge","descriptors":[` + descs(65) + `]}`,
		`{"domain":"edge","descriptors":[{"entries":[` + entries(33) + `]}]}`,
		`{"domain":"","descriptors":[` + desc + `]}`,
		`{"domain":"edge"}`,
		`{"domain":"edge","descriptors":[{}]}`,
		`{"domain":"edge","descriptors":[{"entries":[` + entry + `],"limit":{"requestsPerUnit":1,"unit":"UNKNOWN"}}]}`,
		`{"domain":"edge","descriptors":[{"entries":[` + entry + `],"limit":{"requestsPerUnit":0,"unit":"SECOND"}}]}`,
		// Not a RateLimitRequest: 400.
		``,
		`null`,
		`[]`,
		`{`,
		`{"domain":"edge","descriptors":[` + desc,
		`{"domain":"edge","domain":"edge"}`,
		`{"domian":"edge"}`,
		`{"domain":1}`,
		`{"domain":"edge","hitsAddend":-1}`,
		`{"domain":"edge","hitsAddend":1e99}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"a","value":"` + "\xff\xfe" + `"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"a","value":"\ud800"}]}]}`,
		`{"domain":"edge","descriptors":[{"entries":[{"key":"a","value":"b"}],"limit":{"unit":"FORTNIGHT"}}]}`,
		strings.Repeat("[", 10_000),
		"\x00",
	}
}

// FuzzJSON posts arbitrary bodies to /json in front of a real service on the
// embedded store. The handler never panics; it answers 200, 429, 400 or
// 503; a 200 or 429 is a RateLimitResponse with one status per descriptor,
// whose overall code is the HTTP status's.
func FuzzJSON(f *testing.F) {
	h, _ := newRLSHandler(f, nil)
	for _, s := range jsonSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		code, contentType, out := postJSON(h, body)
		switch code {
		case 200, 429:
		case 400, 503:
			if contentType != "text/plain; charset=utf-8" || len(out) == 0 {
				t.Fatalf("%d with %q %q, want a plain text message", code, contentType, out)
			}
			return
		default:
			t.Fatalf("POST /json %.200q: status %d %q, want 200, 429, 400 or 503", body, code, out)
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			t.Fatalf("%d for a body that is not a RateLimitRequest (%v): %.200q", code, err, body)
		}
		if n := len(req.GetDescriptors()); req.GetDomain() == "" || n == 0 || n > rls.MaxDescriptors {
			t.Fatalf("%d for domain %q with %d descriptors, want 400", code, req.GetDomain(), n)
		}
		for i, d := range req.GetDescriptors() {
			if n := len(d.GetEntries()); n == 0 || n > rls.MaxEntries {
				t.Fatalf("%d for descriptor %d with %d entries, want 400", code, i, n)
			}
		}
		if contentType != "application/json" {
			t.Fatalf("%d with Content-Type %q, want application/json", code, contentType)
		}
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%d with a body that is not a RateLimitResponse (%v): %q", code, err, out)
		}
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			t.Fatalf("%d statuses for %d descriptors: %s", len(resp.GetStatuses()), len(req.GetDescriptors()), out)
		}
		over := false
		for i, st := range resp.GetStatuses() {
			switch st.GetCode() {
			case rlsv3.RateLimitResponse_OK:
			case rlsv3.RateLimitResponse_OVER_LIMIT:
				over = true
			default:
				t.Fatalf("status %d has code %v: %s", i, st.GetCode(), out)
			}
		}
		wantOverall := rlsv3.RateLimitResponse_OK
		if over {
			wantOverall = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if resp.GetOverallCode() != wantOverall || (code == 429) != over {
			t.Fatalf("HTTP %d with overall code %v and statuses over=%v: %s", code, resp.GetOverallCode(), over, out)
		}
	})
}
