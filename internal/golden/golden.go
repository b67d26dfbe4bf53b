// Package golden checks a generated file against what the code generates
// now, for the tests of the packages that own a generated document: run
// with -update, the test rewrites the file instead.
package golden

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files instead of checking them")

// Check fails t when the file at path is not want, naming how to
// regenerate it; with -update it writes want to path.
func Check(t *testing.T, path, want, regenerate string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from what the code generates: run %s", path, regenerate)
	}
}
