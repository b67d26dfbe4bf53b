package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a Client
// closed, a server stopped, must take theirs with them.
//
// One goroutine is go-redis's, not ours: once a pool has failed as many
// dials as it has connections (the tests' service whose Redis is down),
// it probes in the background (ConnPool.tryDial), sleeping a second
// between probes and seeing the pool closed only after its sleep, longer
// than goleak waits.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
