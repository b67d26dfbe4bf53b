package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a Client
// closed, a server stopped, must take theirs with them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
