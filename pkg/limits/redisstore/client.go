package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
)

// DefaultTimeout is the socket timeout NewClient uses when
// ClientOptions.Timeout is zero: the default of -store-timeout.
const DefaultTimeout = redispipe.DefaultTimeout

// ClientOptions are the -redis-* flags of the binary (redispipe, which
// builds the clients of every Redis store, says what each does).
type ClientOptions = redispipe.ClientOptions

// NewClient builds the go-redis client that the flags describe, tuned to
// fail fast (redispipe.NewClient): a *redis.Client for a URL, a
// *redis.ClusterClient for cluster seeds, a failover *redis.Client for
// Sentinels. Pass it to New; Close it on shutdown.
func NewClient(o ClientOptions) (redis.UniversalClient, error) { return redispipe.NewClient(o) }
