package forwardauth

import (
	"net/http"
	"testing"
)

// BenchmarkDescriptors: the documented edge policy's four descriptors
// built from a forwarded request, and its client read behind a trusted
// proxy: the work forward-auth adds to a decision before the service's.
func BenchmarkDescriptors(b *testing.B) {
	c, err := Load("../../config/forward-auth.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p := c.Policy("edge")
	h := http.Header{}
	h.Set("X-Forwarded-For", "198.51.100.7")
	h.Set("X-Original-Method", "POST")
	h.Set("X-Original-URI", "/login?next=/")
	h.Set("X-Forwarded-Host", "example.com")
	h.Set("X-Api-Key", "k-0123456789")
	b.ReportAllocs()
	for b.Loop() {
		client, _, refusal := c.Client("127.0.0.1:40000", h)
		if refusal != nil {
			b.Fatal(refusal)
		}
		req := ForwardedRequest(h, client)
		ds, refusal := p.Descriptors(&req)
		if refusal != nil || len(ds) != 4 {
			b.Fatalf("got %d descriptors (%v), want 4", len(ds), refusal)
		}
	}
}
