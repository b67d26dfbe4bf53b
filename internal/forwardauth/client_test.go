package forwardauth

import (
	"net/http"
	"testing"
)

func TestClient(t *testing.T) {
	c, err := Parse("t.yaml", []byte("trusted_proxies: [127.0.0.1, 10.0.0.0/8, '::1/128']\n"+minimal))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		header     []string
		want       string
		ignored    bool
		refused    bool
	}{
		{"untrusted peer, no headers", "192.0.2.7:5000", nil, "192.0.2.7", false, false},
		{"untrusted peer spoofs", "192.0.2.7:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "192.0.2.7", true, false},
		{"untrusted peer spoofs X-Real-IP", "192.0.2.7:5000", []string{"X-Real-IP", "198.51.100.1"}, "192.0.2.7", true, false},
		{"trusted peer, rightmost untrusted", "127.0.0.1:5000", []string{"X-Forwarded-For", "6.6.6.6, 198.51.100.1, 10.0.0.5"}, "198.51.100.1", false, false},
		{"trusted peer, two headers", "127.0.0.1:5000", []string{"X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "198.51.100.2"}, "198.51.100.2", false, false},
		{"trusted peer, all trusted", "127.0.0.1:5000", []string{"X-Forwarded-For", "10.0.0.9, 10.0.0.5"}, "10.0.0.9", false, false},
		{"trusted peer, X-Real-IP", "[::1]:5000", []string{"X-Real-IP", "2001:db8::5"}, "2001:db8::5", false, false},
		{"trusted peer, nothing forwarded", "127.0.0.1:5000", nil, "127.0.0.1", false, false},
		{"mapped peer", "[::ffff:192.0.2.7]:5000", nil, "192.0.2.7", false, false},
		{"trusted peer, garbage", "127.0.0.1:5000", []string{"X-Forwarded-For", "6.6.6.6, nonsense"}, "", false, true},
		{"trusted peer, garbage left of the client", "127.0.0.1:5000", []string{"X-Forwarded-For", "nonsense, 198.51.100.1"}, "198.51.100.1", false, false},
		{"trusted peer, bad X-Real-IP", "127.0.0.1:5000", []string{"X-Real-IP", "x"}, "", false, true},
		{"unix socket", "@", nil, "invalid IP", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.header); i += 2 {
				h.Add(tc.header[i], tc.header[i+1])
			}
			addr, ignored, refusal := c.Client(tc.peer, h)
			if (refusal != nil) != tc.refused {
				t.Fatalf("refusal %v, want refused %v", refusal, tc.refused)
			}
			if tc.refused {
				if refusal.Status != http.StatusBadRequest || refusal.Outcome != OutcomeBadForwardedFor {
					t.Fatalf("got %+v, want 400 %s", refusal, OutcomeBadForwardedFor)
				}
				return
			}
			if addr.String() != tc.want || ignored != tc.ignored {
				t.Fatalf("got %s ignored=%v, want %s ignored=%v", addr, ignored, tc.want, tc.ignored)
			}
		})
	}
}
