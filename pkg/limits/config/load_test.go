package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

const day = 24 * time.Hour

// An envoyproxy/ratelimit file loads unchanged and means what it means
// there; only the default algorithm differs.
func TestLoadEnvoyFile(t *testing.T) {
	c, err := Load("testdata/good/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Domain{Name: "edge_proxy", File: "testdata/good/envoy.yaml", Descriptors: []*Descriptor{
		{Key: "remote_address", Line: 6, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: 10, Period: time.Second},
			Unit:  Second, UnitMultiplier: 1, Line: 8,
		}}},
		{Key: "remote_address", Value: "50.0.0.5", Line: 12, Rules: []*Rule{{Unlimited: true, Line: 15}}},
		{Key: "to_cluster", Value: "mongo_cluster", Line: 18, Descriptors: []*Descriptor{
			{Key: "from_cluster", Value: "*", DetailedMetric: true, Line: 21, Rules: []*Rule{{
				Limit: limits.Limit{Requests: 100, Period: time.Minute},
				Unit:  Minute, UnitMultiplier: 1, Line: 25,
			}}},
		}},
		{Key: "path", Value: "/api/*", ValueToMetric: true, ShareThreshold: true, Line: 29, Rules: []*Rule{{
			Name:  "api",
			Limit: limits.Limit{Requests: 600, Period: time.Minute},
			Unit:  Minute, UnitMultiplier: 1, Line: 34,
		}}},
		{Key: "path", Value: "/api/admin/*", Line: 37, Rules: []*Rule{{
			Name:  "admin",
			Limit: limits.Limit{Requests: 60, Period: time.Minute},
			Unit:  Minute, UnitMultiplier: 1,
			Replaces: []string{"api"},
			Line:     40,
		}}},
		{Key: "client_id", Value: "foo", ShadowMode: true, Line: 47, Rules: []*Rule{{
			Limit: limits.Limit{Requests: 1000, Period: time.Hour},
			Unit:  Hour, UnitMultiplier: 1, Line: 52,
		}}},
		{Key: "source_cluster", Value: "proxy", Line: 55, Descriptors: []*Descriptor{
			{Key: "destination_cluster", Value: "bar", Line: 58, Descriptors: []*Descriptor{
				{Key: "remote_address", Line: 61, Rules: []*Rule{{
					Limit: limits.Limit{Requests: 5, Period: day},
					Unit:  Day, UnitMultiplier: 1, Line: 62,
				}}},
				{Key: "user", Line: 63},
			}},
		}},
	}}
	if len(c.Domains) != 1 {
		t.Errorf("Load: got %d domains, want 1", len(c.Domains))
	}
	checkModel(t, "edge_proxy", c.Domains["edge_proxy"], want)
}

// Every envoy-rls addition: algorithms, burst, unit_multiplier,
// failure_mode, count_refused, metadata, wildcards anywhere.
func TestLoadAdditions(t *testing.T) {
	d := parseFile(t, "testdata/good/additions.yaml")
	want := &Domain{Name: "rls", File: "testdata/good/additions.yaml", Descriptors: []*Descriptor{
		{Key: "user", Line: 4, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 300, Period: 5 * time.Minute},
			Unit:  Minute, UnitMultiplier: 5,
			FailureMode: FailDeny,
			Line:        6,
		}}},
		{Key: "user", Value: "vip", Line: 13, Rules: []*Rule{{
			Name:  "vip",
			Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, Burst: 50},
			Unit:  Second, UnitMultiplier: 1,
			FailureMode: FailAllow,
			Line:        16,
		}}},
		{
			Key: "api_key", Value: "*-test", QuotaMode: true, Line: 25,
			Metadata: mustStruct(t, map[string]any{"team": "payments", "tier": 2, "owner": nil}),
			Rules: []*Rule{{
				Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 60, Period: time.Hour, Burst: 60},
				Unit:  Hour, UnitMultiplier: 1, Line: 33,
			}},
		},
		{Key: "tenant", Value: "a*b*", Line: 37, Descriptors: []*Descriptor{
			{Key: "plan", Value: "free", Line: 40, Rules: []*Rule{{
				Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: 1000000, Period: 30 * day},
				Unit:  Day, UnitMultiplier: 30, Line: 43,
			}}},
		}},
	}}
	checkModel(t, "rls", d, want)
}

// metadata is any mapping: nested mappings, lists, numbers, bools and null
// keep their types in the Struct (a date is its text as written), and a
// merge key inside it merges as it does anywhere in the file.
func TestLoadMetadata(t *testing.T) {
	d := parseFile(t, "testdata/good/metadata.yaml")
	if len(d.Descriptors) != 2 {
		t.Fatalf("got %d descriptors, want 2", len(d.Descriptors))
	}
	for i, want := range []map[string]any{
		{
			"service_with_quota": map[string]any{"name": "billing", "owners": []any{"payments", "platform"}},
			"quota":              map[string]any{"tokens": 1500, "ratio": 0.25, "hard": true, "since": "2026-01-02"},
			"tiers": []any{
				map[string]any{"name": "free", "per_day": 100},
				map[string]any{"name": "pro", "per_day": 10000},
			},
			"note": nil,
		},
		{"region": "eu-west-1", "retries": 5},
	} {
		got := d.Descriptors[i].Metadata
		if w := mustStruct(t, want); !proto.Equal(got, w) {
			t.Errorf("descriptor %d: got metadata %v, want %v", i, got, w)
		}
	}
	if got := d.Descriptors[0].Metadata.GetFields()["quota"].GetStructValue().GetFields()["tokens"].GetNumberValue(); got != 1500 {
		t.Errorf("quota.tokens: got %v, want the number 1500", got)
	}
}

// The five algorithms with their burst defaults, count_refused on both the
// rule and its limit, and rate_limits lists, one rule per body in order.
func TestLoadAlgorithms(t *testing.T) {
	d := parseFile(t, "testdata/good/algorithms.yaml")
	want := &Domain{Name: "edge", File: "testdata/good/algorithms.yaml", Descriptors: []*Descriptor{
		{Key: "fixed", Line: 5, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 100, Period: time.Minute, CountRefused: true},
			Unit:  Minute, UnitMultiplier: 1, CountRefused: true, Line: 7,
		}}},
		{Key: "sliding", Line: 12, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: 100, Period: time.Minute},
			Unit:  Minute, UnitMultiplier: 1, Line: 14,
		}}},
		{Key: "log", Line: 19, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.SlidingLog, Requests: limits.MaxLogRequests, Period: time.Hour},
			Unit:  Hour, UnitMultiplier: 1, Line: 21,
		}}},
		{Key: "token", Line: 25, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, Burst: 20},
			Unit:  Second, UnitMultiplier: 1, Line: 27,
		}}},
		{Key: "leaky", Line: 33, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second},
			Unit:  Second, UnitMultiplier: 1, Line: 35,
		}}},
		{Key: "leaky", Value: "queue", Line: 41, Rules: []*Rule{{
			Limit: limits.Limit{Algorithm: limits.LeakyBucket, Requests: 10, Period: time.Second, Burst: 10, CountRefused: true},
			Unit:  Second, UnitMultiplier: 1, CountRefused: true, Line: 44,
		}}},
		{Key: "user", Line: 51, Rules: []*Rule{
			{
				Name:  "user-second",
				Limit: limits.Limit{Algorithm: limits.TokenBucket, Requests: 10, Period: time.Second, Burst: 10},
				Unit:  Second, UnitMultiplier: 1, Line: 53,
			},
			{
				Name:  "user-day",
				Limit: limits.Limit{Algorithm: limits.FixedWindow, Requests: 10000, Period: day, CountRefused: true},
				Unit:  Day, UnitMultiplier: 1, CountRefused: true, Replaces: []string{"api"}, Line: 57,
			},
		}, Descriptors: []*Descriptor{
			{Key: "plan", Line: 66, Rules: []*Rule{{
				Limit: limits.Limit{Requests: 5, Period: time.Second},
				Unit:  Second, UnitMultiplier: 1, Line: 68,
			}}},
		}},
		{Key: "api_key", Value: "*", ShadowMode: true, Line: 71, Rules: []*Rule{
			{Limit: limits.Limit{Requests: 10, Period: time.Second}, Unit: Second, UnitMultiplier: 1, Line: 75},
			{Limit: limits.Limit{Requests: 100, Period: time.Minute}, Unit: Minute, UnitMultiplier: 1, Line: 76},
			{
				Limit: limits.Limit{Algorithm: limits.SlidingLog, Requests: 1000, Period: time.Hour},
				Unit:  Hour, UnitMultiplier: 1, FailureMode: FailDeny, Line: 77,
			},
			{
				Limit: limits.Limit{Algorithm: limits.LeakyBucket, Requests: 600, Period: 2 * time.Minute, Burst: 2},
				Unit:  Minute, UnitMultiplier: 2, Line: 78,
			},
		}},
	}}
	checkModel(t, "edge", d, want)
}

// Options.MaxDelay bounds a leaky bucket's worst wait, burst × period /
// requests_per_unit; the zero Options are DefaultOptions.
func TestOptionsMaxDelay(t *testing.T) {
	if got := DefaultOptions(); got.MaxDelay != time.Second {
		t.Errorf("DefaultOptions: got MaxDelay %s, want 1s", got.MaxDelay)
	}
	leaky := func(requests, burst int64, unit string) []byte {
		return fmt.Appendf(nil, "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      algorithm: leaky_bucket\n      unit: %s\n      requests_per_unit: %d\n      burst: %d\n", unit, requests, burst)
	}
	for _, tc := range []struct {
		name     string
		maxDelay time.Duration
		data     []byte
		want     string // "" for no error
	}{
		{"at the bound", time.Second, leaky(10, 10, "second"), ""},
		{"above the bound", time.Second, leaky(10, 11, "second"), "x.yaml:8: burst: a leaky_bucket of 10 per second with burst 11 may delay a request 1.1s, above -max-delay 1s"},
		{"zero is the default", 0, leaky(10, 11, "second"), "x.yaml:8: burst: a leaky_bucket of 10 per second with burst 11 may delay a request 1.1s, above -max-delay 1s"},
		{"negative is the default", -time.Second, leaky(10, 10, "second"), ""},
		{"a longer bound", time.Minute, leaky(10, 600, "second"), ""},
		{"a shorter bound", 50 * time.Millisecond, leaky(10, 1, "second"), "x.yaml:8: burst: a leaky_bucket of 10 per second with burst 1 may delay a request 100ms, above -max-delay 50ms"},
		{"no queue never waits", time.Nanosecond, leaky(1, 0, "day"), ""},
		{"the wait rounded up to a millisecond", time.Second, leaky(7, 10, "second"), "x.yaml:8: burst: a leaky_bucket of 7 per second with burst 10 may delay a request 1.429s, above -max-delay 1s"},
		{"a wait under a millisecond", 100 * time.Microsecond, leaky(2000, 1, "second"), "x.yaml:8: burst: a leaky_bucket of 2000 per second with burst 1 may delay a request 500µs, above -max-delay 100µs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Options{MaxDelay: tc.maxDelay}.Parse("x.yaml", tc.data)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: got %v, want no error", err)
				}
				return
			}
			checkError(t, "Parse", err, tc.want)
		})
	}

	// Load applies the options to every file of a directory.
	_, err := Options{MaxDelay: 500 * time.Millisecond}.Load("testdata/good")
	checkError(t, "Load", err, "testdata/good/algorithms.yaml:47: burst: a leaky_bucket of 10 per second with burst 10 may delay a request 1s, above -max-delay 500ms")
	c, err := Options{MaxDelay: 2 * time.Second}.Load("testdata/bad/leaky_bucket_max_delay.yaml")
	if err != nil {
		t.Fatalf("Load: got %v, want no error", err)
	}
	if got, want := c.Domains["api"].Descriptors[0].Rules[0].Limit.MaxWait(), 2*time.Second; got != want {
		t.Errorf("Load: got MaxWait %s, want %s", got, want)
	}
}

// An explicit burst of 0 is a leaky bucket's default; a leaky bucket takes
// any burst from 0, a token bucket from 1.
func TestParseLeakyBurst(t *testing.T) {
	for _, burst := range []string{"", "burst: 0, ", "burst: 5, "} {
		d, err := Parse("x.yaml", []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: leaky_bucket, "+burst+"unit: second, requests_per_unit: 10}\n"))
		if err != nil {
			t.Fatalf("%q: got %v, want no error", burst, err)
		}
		l := d.Descriptors[0].Rules[0].Limit
		want := int64(0)
		if burst == "burst: 5, " {
			want = 5
		}
		if l.Burst != want || l.Capacity() != want || l.MaxCost() != want+1 {
			t.Errorf("%q: got %v (capacity %d, max cost %d), want burst %d", burst, l, l.Capacity(), l.MaxCost(), want)
		}
	}
}

// YAML features envoyproxy/ratelimit's YAML library accepts read the same.
func TestLoadCompat(t *testing.T) {
	d := parseFile(t, "testdata/good/compat.yaml")
	month := limits.Limit{Requests: 1000, Period: 30 * day}
	want := &Domain{Name: "compat", File: "testdata/good/compat.yaml", Descriptors: []*Descriptor{
		{Key: "status", Value: "429", ShadowMode: true, Line: 7, Rules: []*Rule{{
			Limit: month, Unit: Month, UnitMultiplier: 1, Line: 10, // the anchor starts the mapping
		}}},
		{Key: "status", Value: "1.50", Line: 13, Rules: []*Rule{{
			Limit: limits.Limit{Requests: 10, Period: 30 * day}, Unit: Month, UnitMultiplier: 1, Line: 17,
		}}},
		{Key: "yearly", Line: 19, Rules: []*Rule{{
			Limit: limits.Limit{Requests: 1, Period: 365 * day}, Unit: Year, UnitMultiplier: 1, Line: 21,
		}}},
		{Key: "leaf", Line: 22},
	}}
	checkModel(t, "compat", d, want)
}

// A directory laid out as a Kubernetes ConfigMap volume: the files are
// symlinks into ..data, itself a symlink to a timestamped directory. Dot
// names, subdirectories and other extensions are skipped; each would
// duplicate a domain if it were read.
func TestLoadDirectory(t *testing.T) {
	c, err := Load("testdata/good/dir")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Domain{
		"api": {Name: "api", File: "testdata/good/dir/api.yaml", Descriptors: []*Descriptor{
			{Key: "path", Line: 5, Rules: []*Rule{{
				Limit: limits.Limit{Requests: 100, Period: time.Second},
				Unit:  Second, UnitMultiplier: 1, Line: 7,
			}}},
		}},
		"web": {Name: "web", File: "testdata/good/dir/web.yml", Descriptors: []*Descriptor{
			{Key: "remote_address", Line: 3, Rules: []*Rule{{
				Limit: limits.Limit{Requests: 60, Period: time.Minute},
				Unit:  Minute, UnitMultiplier: 1, Line: 5,
			}}},
		}},
	}
	checkModel(t, "Domains", c.Domains, want)
}

// With EmptyDir a directory without limits files is a config with no
// domains; a file is still read as before, and a missing path still fails.
func TestLoadEmptyDir(t *testing.T) {
	o := DefaultOptions()
	o.EmptyDir = true
	c, err := o.Load("testdata/bad/empty_dir")
	if err != nil || len(c.Domains) != 0 {
		t.Fatalf("empty directory: got %v, %v; want no domains, no error", c, err)
	}
	if c, err := o.Load("testdata/good/dir"); err != nil || len(c.Domains) != 2 {
		t.Errorf("directory with files: got %v, %v", c, err)
	}
	if _, err := o.Load("testdata/bad/no_such_dir"); err == nil {
		t.Error("missing directory: got no error")
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("missing.yaml", filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "nothing-here"), filepath.Join(dir, "nothing-here") + ": stat: no such file or directory"},
		{dir, filepath.Join(dir, "broken.yaml") + ": stat: no such file or directory"},
	} {
		_, err := Load(tc.path)
		checkError(t, "Load("+tc.path+")", err, tc.want)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(%s): got errors.Is(err, fs.ErrNotExist) false, want true", tc.path)
		}
	}
}

// Aliases that expand exponentially (here through merge keys, each
// merging the previous mapping four times) stop early with an error.
func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: a\ndescriptors:\n  - key: k0\n    metadata: &l0 {a: b}\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "  - key: k%d\n    metadata: &l%d {<<: [*l%d, *l%d, *l%d, *l%d]}\n", i, i, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Line == 0 || !strings.Contains(e.Msg, "excessive aliasing") {
		t.Fatalf("Parse: got %v, want excessive aliasing, on a line", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Parse: took %s, want well under a second", d)
	}
}

func TestLines(t *testing.T) {
	c, err := Load("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Lines()
	want := []string{
		"compat.status_1.50: sliding_window 10/720h0m0s shadow_mode=false",
		"compat.status_429: sliding_window 1000/720h0m0s shadow_mode=true",
		"compat.yearly: sliding_window 1/8760h0m0s shadow_mode=false",
		"edge.api_key_*[0]: sliding_window 10/1s shadow_mode=true",
		"edge.api_key_*[1]: sliding_window 100/1m0s shadow_mode=true",
		"edge.api_key_*[2]: sliding_log 1000/1h0m0s shadow_mode=true failure_mode=deny",
		"edge.api_key_*[3]: leaky_bucket 600/2m0s burst=2 shadow_mode=true",
		"edge.fixed: fixed_window 100/1m0s shadow_mode=false count_refused=true",
		"edge.leaky: leaky_bucket 10/1s burst=0 shadow_mode=false",
		"edge.leaky_queue: leaky_bucket 10/1s burst=10 shadow_mode=false count_refused=true",
		"edge.log: sliding_log 10000/1h0m0s shadow_mode=false",
		"edge.sliding: sliding_window 100/1m0s shadow_mode=false",
		"edge.token: token_bucket 10/1s burst=20 shadow_mode=false",
		"edge.user.plan: sliding_window 5/1s shadow_mode=false",
		"edge.user[0]: token_bucket 10/1s burst=10 name=user-second shadow_mode=false",
		"edge.user[1]: fixed_window 10000/24h0m0s name=user-day shadow_mode=false count_refused=true replaces=api",
		"edge_proxy.client_id_foo: sliding_window 1000/1h0m0s shadow_mode=true",
		"edge_proxy.path_/api/*: sliding_window 600/1m0s name=api shadow_mode=false",
		"edge_proxy.path_/api/admin/*: sliding_window 60/1m0s name=admin shadow_mode=false replaces=api",
		"edge_proxy.remote_address: sliding_window 10/1s shadow_mode=false",
		"edge_proxy.remote_address_50.0.0.5: unlimited shadow_mode=false",
		"edge_proxy.source_cluster_proxy.destination_cluster_bar.remote_address: sliding_window 5/24h0m0s shadow_mode=false",
		"edge_proxy.to_cluster_mongo_cluster.from_cluster_*: sliding_window 100/1m0s shadow_mode=false",
		"failure_modes.user_allow: sliding_window 10/1s shadow_mode=false failure_mode=allow",
		"failure_modes.user_deny: sliding_window 10/1s shadow_mode=false failure_mode=deny",
		"failure_modes.user_error: sliding_window 10/1s shadow_mode=false failure_mode=error",
		"failure_modes.user_local: sliding_window 10/1s shadow_mode=false failure_mode=local",
		"llm.api_key.model: concurrency 10 lease=30s shadow_mode=false",
		"llm.api_key: fixed_window 1000000/24h0m0s shadow_mode=false",
		"metadata.service: sliding_window 20/1m0s shadow_mode=false",
		"metadata.service_reports: sliding_window 5/1s shadow_mode=false",
		"rls.api_key_*-test: token_bucket 60/1h0m0s burst=60 shadow_mode=false quota_mode=true",
		"rls.tenant_a*b*.plan_free: sliding_window 1000000/720h0m0s shadow_mode=false",
		"rls.user: fixed_window 300/5m0s shadow_mode=false failure_mode=deny",
		"rls.user_vip: token_bucket 10/1s burst=50 name=vip shadow_mode=false failure_mode=allow",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Lines:\ngot  %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if got := (*Config)(nil).Lines(); got != nil {
		t.Errorf("nil Config: got %q, want nil", got)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.yaml", Line: 3, Word: "unit", Msg: "bad"}, "a.yaml:3: unit: bad"},
		{Error{File: "a.yaml", Line: 3, Msg: "bad"}, "a.yaml:3: bad"},
		{Error{File: "a.yaml", Word: "api", Msg: "bad"}, "a.yaml: api: bad"},
		{Error{File: "dir", Msg: "bad"}, "dir: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestUnknownFieldMessage(t *testing.T) {
	for _, tc := range []struct {
		l          *level
		name, want string
	}{
		{rootLevel, "Domain", "unknown field at the top level, did you mean domain?"},
		{rootLevel, "rate_limit", "unknown field at the top level (it belongs in a descriptor)"},
		{descriptorLevel, "vaule", "unknown field in a descriptor, did you mean value?"},
		{descriptorLevel, "ratelimit", "unknown field in a descriptor, did you mean rate_limit?"},
		{descriptorLevel, "burst", "unknown field in a descriptor (it belongs in rate_limit)"},
		{descriptorLevel, "limit", "unknown field in a descriptor"},
		{ruleLevel, "descriptors", "unknown field in a rate limit (it belongs in a descriptor)"},
		{ruleLevel, "unit_multiplyer", "unknown field in a rate limit, did you mean unit_multiplier?"},
		{replacesLevel, "names", "unknown field in a replaces entry, did you mean name?"},
	} {
		if got := tc.l.unknown(tc.name); got != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.l.where, tc.name, got, tc.want)
		}
	}
}

func parseFile(t *testing.T, file string) *Domain {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(file, data)
	if err != nil {
		t.Fatalf("Parse: got %v, want no error", err)
	}
	return d
}

// checkModel compares got and want field by field and reports each
// difference by its path, such as edge_proxy.Descriptors[2].Rules[0].Line.
func checkModel(t *testing.T, name string, got, want any) {
	t.Helper()
	for _, d := range diff(name, reflect.ValueOf(got), reflect.ValueOf(want)) {
		t.Error(d)
	}
}

func diff(path string, got, want reflect.Value) []string {
	if m, ok := got.Interface().(proto.Message); ok && got.Kind() == reflect.Pointer && !got.IsNil() && !want.IsNil() {
		if !proto.Equal(m, want.Interface().(proto.Message)) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, m, want.Interface())}
		}
		return nil
	}
	switch got.Kind() {
	case reflect.Pointer:
		if got.IsNil() || want.IsNil() {
			if got.IsNil() != want.IsNil() {
				return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
			}
			return nil
		}
		return diff(path, got.Elem(), want.Elem())
	case reflect.Struct:
		var out []string
		for i := range got.NumField() {
			if f := got.Type().Field(i); f.IsExported() {
				out = append(out, diff(path+"."+f.Name, got.Field(i), want.Field(i))...)
			}
		}
		return out
	case reflect.Slice:
		var out []string
		if got.Len() != want.Len() {
			out = append(out, fmt.Sprintf("%s: got %d elements, want %d", path, got.Len(), want.Len()))
		}
		for i := range min(got.Len(), want.Len()) {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), got.Index(i), want.Index(i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range want.MapKeys() {
			if !got.MapIndex(k).IsValid() {
				out = append(out, fmt.Sprintf("%s[%q]: got nothing, want %v", path, k, want.MapIndex(k)))
			}
		}
		for _, k := range got.MapKeys() {
			w := want.MapIndex(k)
			if !w.IsValid() {
				out = append(out, fmt.Sprintf("%s[%q]: got %v, want nothing", path, k, got.MapIndex(k)))
				continue
			}
			out = append(out, diff(fmt.Sprintf("%s[%q]", path, k), got.MapIndex(k), w)...)
		}
		return out
	}
	if !reflect.DeepEqual(got.Interface(), want.Interface()) {
		return []string{fmt.Sprintf("%s: got %#v, want %#v", path, got.Interface(), want.Interface())}
	}
	return nil
}

// lineEnd knows YAML's line breaks: \n, \r\n, \r, NEL, LS and PS.
func TestLineEnd(t *testing.T) {
	data := []byte("a\nb\r\nc\rd\u0085e\u2028f")
	var ends []int
	for end := 0; end < len(data); {
		end = lineEnd(data, end)
		ends = append(ends, end)
	}
	if want := []int{2, 5, 7, 10, 14, 15}; !slices.Equal(ends, want) {
		t.Errorf("lineEnd: got line ends %v, want %v", ends, want)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
