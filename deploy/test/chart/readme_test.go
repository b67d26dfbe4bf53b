package chart

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// opaque are the values README.md describes whole: their content is the
// user's (limits) or Kubernetes's.
var opaque = []string{"limits", "podSecurityContext", "securityContext", "resources", "startupProbe", "readinessProbe", "livenessProbe"}

// TestReadmeValues: the chart's README lists every value of values.yaml,
// and names no value that is not there.
func TestReadmeValues(t *testing.T) {
	var want []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			name := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !slices.Contains(opaque, name) {
				walk(name+".", sub)
				continue
			}
			want = append(want, name)
		}
	}
	walk("", loadChart(t).Values)
	slices.Sort(want)

	var got []string
	cell := regexp.MustCompile("`([a-zA-Z.]+)`")
	for _, line := range strings.Split(string(readFile(t, filepath.Join(chartDir(t), "README.md"))), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range cell.FindAllStringSubmatch(cols[1], -1) {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	for _, v := range want {
		if _, found := slices.BinarySearch(got, v); !found {
			t.Errorf("README.md's values table lacks %s", v)
		}
	}
	for _, v := range got {
		if _, found := slices.BinarySearch(want, v); !found {
			t.Errorf("README.md's values table lists %s, which values.yaml does not have", v)
		}
	}
}
