package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Shape of the generated large file: largeKeys keys with largeValues values
// each, the first value of every key holding one nested descriptor.
const (
	largeKeys        = 100
	largeValues      = 99
	largeDescriptors = largeKeys*largeValues + largeKeys // 10,000
)

var largeAlgorithms = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket"}

// largeFile returns a limits file of largeDescriptors descriptors: exact and
// wildcard values, every algorithm but leaky_bucket, rate_limits lists,
// names, and one nested level.
func largeFile() []byte {
	var b strings.Builder
	b.WriteString("domain: large\ndescriptors:\n")
	for k := range largeKeys {
		for v := range largeValues {
			value := fmt.Sprintf("value-%d", v)
			if v%10 == 9 {
				value += "-*"
			}
			fmt.Fprintf(&b, "  - key: key-%d\n    value: %q\n", k, value)
			switch {
			case v == 0:
				fmt.Fprintf(&b, "    descriptors:\n      - key: user\n        rate_limit: {name: nested-%d, unit: minute, requests_per_unit: 10}\n", k)
			case v%7 == 0:
				fmt.Fprintf(&b, "    rate_limits:\n      - {name: burst-%d-%d, algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20}\n      - {unit: day, requests_per_unit: 10000}\n", k, v)
			default:
				fmt.Fprintf(&b, "    rate_limit:\n      algorithm: %s\n      unit: %s\n      unit_multiplier: %d\n      requests_per_unit: %d\n",
					largeAlgorithms[(k+v)%len(largeAlgorithms)], []string{"second", "minute", "hour", "day"}[v%4], 1+v%5, 1+k*v%1000)
			}
		}
	}
	return []byte(b.String())
}

func writeLargeFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "large.yaml")
	if err := os.WriteFile(path, largeFile(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func countDescriptors(ds []*config.Descriptor) (n, rules int) {
	for _, d := range ds {
		cn, cr := countDescriptors(d.Descriptors)
		n += 1 + cn
		rules += len(d.Rules) + cr
	}
	return n, rules
}

// A file of 10,000 descriptors loads, whole, well within the bound (Load
// runs at startup and on every reload; BenchmarkLoad10k measures it).
func TestLoad10k(t *testing.T) {
	path := writeLargeFile(t)
	start := time.Now()
	c, err := config.Load(path)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains["large"]
	if d == nil {
		t.Fatalf("domains %v: want large", c.Domains)
	}
	n, rules := countDescriptors(d.Descriptors)
	wantRules := largeDescriptors - largeKeys // every descriptor but the parents
	for v := 1; v < largeValues; v++ {
		if v%7 == 0 {
			wantRules += largeKeys // a second limit each
		}
	}
	if n != largeDescriptors || rules != wantRules {
		t.Errorf("loaded %d descriptors with %d limits, want %d with %d", n, rules, largeDescriptors, wantRules)
	}
	if lines := c.Lines(); len(lines) != wantRules {
		t.Errorf("Lines() has %d lines, want %d", len(lines), wantRules)
	}
	// About 0.2 s; 2 s with the race detector.
	bound := 5 * time.Second
	if raceEnabled {
		bound *= 4
	}
	t.Logf("%d descriptors (%d limits, %d bytes) loaded in %v (bound %v)", n, rules, len(largeFile()), elapsed, bound)
	if elapsed > bound {
		t.Errorf("Load took %v, want under %v", elapsed, bound)
	}
}

func BenchmarkLoad10k(b *testing.B) {
	path := writeLargeFile(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
