package memory

import (
	"testing"

	"github.com/envoy-rls/envoy-rls/pkg/limits/storetest"
)

// TestConcurrencyHolders: goroutines that take and give back slots on one
// key never hold more than its slots at once, and leave none held.
func TestConcurrencyHolders(t *testing.T) {
	s := New(Options{})
	t.Cleanup(func() { _ = s.Close() })
	storetest.Holders(t, s, "holders")
}
