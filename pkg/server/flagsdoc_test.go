package server

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from the flags")

const flagsDoc = "../../docs/flags.md"

// docs/flags.md is what the flags say.
func TestFlagsDoc(t *testing.T) {
	want := FlagsMarkdown()
	if *update {
		if err := os.WriteFile(flagsDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(flagsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the flags: run go generate ./pkg/server (go test -run TestFlagsDoc -update)", flagsDoc)
	}
}
