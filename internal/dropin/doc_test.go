package dropin

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/golden"
)

// docs/environment.md is what the table says.
func TestEnvironmentDoc(t *testing.T) {
	golden.Check(t, "../../docs/environment.md", Markdown(), "go generate ./pkg/dropin")
}
