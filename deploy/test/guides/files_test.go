package guides

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checked are the files of deploy/guides that this package's tests read.
var checked = []string{
	istioFile, istioLimitsFile,
	egConfigFile, egPolicyFile,
	contourExtFile, contourConfigFile, contourProxyFile, contourLimitsFile,
}

// TestEveryGuideFile: every file of deploy/guides is checked by a test here
// and linked from docs/kubernetes.md, so that none is added unchecked or
// left undocumented.
func TestEveryGuideFile(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root(t), guidesDir))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !slices.Contains(checked, e.Name()) {
			t.Errorf("%s/%s: no test in deploy/test/guides reads it", guidesDir, e.Name())
		}
		if link := "(../" + guidesDir + "/" + e.Name() + ")"; !strings.Contains(string(doc), link) {
			t.Errorf("docs/kubernetes.md does not link %s/%s", guidesDir, e.Name())
		}
	}
	for _, c := range checked {
		if !slices.Contains(names, c) {
			t.Errorf("%s/%s: read by the tests, not in the directory", guidesDir, c)
		}
	}
}
