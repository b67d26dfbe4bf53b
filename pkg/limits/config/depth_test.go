package config

import (
	"fmt"
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// nestedProto is a message whose descriptors nest levels deep, one per
// level (k1 under k2 …), the deepest with a limit.
func nestedProto(levels int) *rlsconfv3.RateLimitConfig {
	d := &rlsconfv3.RateLimitDescriptor{Key: fmt.Sprintf("k%d", levels), RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1}}
	for i := levels - 1; i >= 1; i-- {
		d = &rlsconfv3.RateLimitDescriptor{Key: fmt.Sprintf("k%d", i), Descriptors: []*rlsconfv3.RateLimitDescriptor{d}}
	}
	return &rlsconfv3.RateLimitConfig{Domain: "deep", Descriptors: []*rlsconfv3.RateLimitDescriptor{d}}
}

// nestedYAML is nestedProto as a limits file.
func nestedYAML(levels int) string {
	var b strings.Builder
	b.WriteString("domain: deep\ndescriptors:\n")
	for i := 1; i <= levels; i++ {
		ind := strings.Repeat("  ", 2*(i-1))
		fmt.Fprintf(&b, "%s  - key: k%d\n", ind, i)
		if i < levels {
			fmt.Fprintf(&b, "%s    descriptors:\n", ind)
		}
	}
	fmt.Fprintf(&b, "%s    rate_limit: {unit: second, requests_per_unit: 1}\n", strings.Repeat("  ", 2*(levels-1)))
	return b.String()
}

// A descriptor as deep as a request's descriptor can reach loads; one
// level more is refused, from a message as from a file, with the depth
// and where it is, and the levels below it are not walked.
func TestDepthBound(t *testing.T) {
	if _, err := FromProto("deep-limits", nestedProto(MaxDepth)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
	if _, err := Parse("deep.yaml", []byte(nestedYAML(MaxDepth))); err != nil {
		t.Errorf("%d levels in a file: %v", MaxDepth, err)
	}
	path := "descriptors[0]" + strings.Repeat(".descriptors[0]", MaxDepth)
	_, err := FromProto("deep-limits", nestedProto(4900))
	want := fmt.Sprintf("deep-limits: %s (deep.k1.k2", path)
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), ".k33): descriptor nested 33 levels deep, deeper than the 32 entries a request's descriptor may have: no request reaches it") {
		t.Errorf("4900 levels: got %v, want %s….k33): descriptor nested 33 levels deep…", err, want)
	}
	_, err = Parse("deep.yaml", []byte(nestedYAML(MaxDepth+1)))
	if err == nil || !strings.HasPrefix(err.Error(), "deep.yaml:67: deep.k1.k2.") || !strings.Contains(err.Error(), "nested 33 levels deep") {
		t.Errorf("33 levels in a file: got %v, want deep.yaml:67: deep.k1.k2.…: descriptor nested 33 levels deep…", err)
	}
}
