package server

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/golden"
)

// docs/flags.md is what the flags say.
func TestFlagsDoc(t *testing.T) {
	golden.Check(t, "../../docs/flags.md", FlagsMarkdown(), "go generate ./internal/server")
}
