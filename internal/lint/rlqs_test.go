package lint

import (
	"strings"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func settings(t *testing.T, ids map[string]*rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder) *xdscorev3.TypedExtensionConfig {
	t.Helper()
	s := &rlqsv3.RateLimitQuotaBucketSettings{BucketIdBuilder: &rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder{BucketIdBuilder: ids}}
	return &xdscorev3.TypedExtensionConfig{Name: "b", TypedConfig: anyOf(t, s)}
}

func custom(t *testing.T, m proto.Message) *rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder {
	return &rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder{
		ValueSpecifier: &rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder_CustomValue{
			CustomValue: &corev3.TypedExtensionConfig{Name: "v", TypedConfig: anyOf(t, m)}}}
}

func literal(s string) *rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder {
	return &rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder{
		ValueSpecifier: &rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder_StringValue{StringValue: s}}
}

func TestBucketOf(t *testing.T) {
	b := bucketOf(settings(t, map[string]*rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder{
		"path": literal("/x"),
		"key":  custom(t, &matcherv3.HttpRequestHeaderMatchInput{HeaderName: "x-key"}),
	}), "bucket_matchers.on_no_match")
	if got, want := bucketString(b.items), `{key=*, path="/x"}`; got != want || b.problem != "" || b.where != `bucket "b"` {
		t.Fatalf("bucket %s %q at %s, want %s, no problem, at bucket \"b\"", got, b.problem, b.where, want)
	}
	b = bucketOf(settings(t, map[string]*rlqsv3.RateLimitQuotaBucketSettings_BucketIdBuilder_ValueBuilder{
		"ip": custom(t, &matcherv3.HttpResponseHeaderMatchInput{HeaderName: "x-ip"}),
	}), "p")
	want := `bucket_id_builder["ip"]: the custom_value type.googleapis.com/envoy.type.matcher.v3.HttpResponseHeaderMatchInput cannot be derived`
	if b.problem != want {
		t.Fatalf("problem %q, want %q", b.problem, want)
	}
}

// TestQuotaUncheckedAndDomain: a bucket lint cannot derive is reported,
// and keeps its domain's unreachable limits unreported; a domain the
// limits lack is a mismatch.
func TestQuotaUncheckedAndDomain(t *testing.T) {
	c, err := config.Options{}.Load("testdata/rlqs/limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ck := &checker{trees: map[string]*tree{}, reached: map[*lnode]bool{}, usedDomain: map[string]bool{},
		incomplete: map[string]bool{}, seen: map[string]bool{}}
	for name, d := range c.Domains {
		ck.trees[name] = newTree(d)
		ck.domainNames = append(ck.domainNames, name)
	}
	ck.quota(&quotaFilter{listener: "l", name: "q", domain: "edge", buckets: []quotaBucket{{where: `bucket "ip"`, problem: "cannot"}}})
	ck.quota(&quotaFilter{listener: "l", name: "q", domain: "prod"})
	ck.unreachable()
	want := []string{
		`unchecked: listener "l" filter "q" bucket "ip": edge: cannot; unreachable limits of this domain are not reported`,
		`domain: listener "l" filter "q": prod: the filter's domain "prod" is not in the limits (domains: edge)`,
	}
	got := strs(ck.findings)
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("findings %q, want %q", got, want)
	}
}

// TestMatchBucketBacksUp: envoy-rls takes, at each level, the best
// match among the entries left (exact, then wildcard, then bare, ties in
// key order), and backs up when that way leads nowhere; lint walks the
// same way.
func TestMatchBucketBacksUp(t *testing.T) {
	c, err := config.Options{}.Load("testdata/rlqs/backup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTree(c.Domains["edge"])
	for _, tc := range []struct {
		name  string
		items []item
		full  bool
		restr string
	}{
		// plan=free is exact: it goes first, then api_key under it.
		{"exact first", []item{{"api_key", value{kind: anyValue}}, {"plan", value{known, "free"}}}, true, ""},
		// Any other plan: the bare api_key sorts first and is taken, but
		// leaves plan with nowhere to go; the walk backs up to the bare
		// plan, then api_key under it.
		{"backs up from the bare key that sorts first", []item{{"api_key", value{kind: anyValue}}, {"plan", value{known, "gold"}}}, true, ""},
		// An unknown plan reaches a limit as "free" and as any other.
		{"unknown", []item{{"api_key", value{kind: anyValue}}, {"plan", value{kind: anyValue}}}, true, `plan="free"`},
	} {
		m := tr.matchBucket(tc.items)
		var restr string
		for _, r := range m.restricted {
			restr += strings.Join(r.values, " ")
		}
		if m.full != tc.full || restr != tc.restr {
			t.Errorf("%s: full %v restricted %q, want %v %q", tc.name, m.full, restr, tc.full, tc.restr)
		}
	}
}

// A way that surely ends on a limit is the one envoy-rls takes: the ways
// after it are not walked, and their limits are not counted as reached.
func TestMatchBucketStopsAtASureLimit(t *testing.T) {
	d, err := config.Options{}.Parse("sure.yaml", []byte(`domain: edge
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    descriptors:
      - key: a
        rate_limit: {unit: second, requests_per_unit: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := newTree(d).matchBucket([]item{{"a", value{kind: anyValue}}, {"b", value{kind: anyValue}}})
	if !m.full || len(m.limited) != 1 || m.limited[0].Path != "a.b" {
		var got []string
		for _, n := range m.limited {
			got = append(got, n.Path)
		}
		t.Fatalf("full %v, limits reached %v; want a.b alone", m.full, got)
	}
}
