package dropin

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/environment.md from the table")

const environmentDoc = "../../docs/environment.md"

// docs/environment.md is what the table says.
func TestEnvironmentDoc(t *testing.T) {
	want := Markdown()
	if *update {
		if err := os.WriteFile(environmentDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(environmentDoc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the table: run go generate ./pkg/dropin (go test -run TestEnvironmentDoc -update)", environmentDoc)
	}
}
