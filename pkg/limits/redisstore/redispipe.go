package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redispipe"
)

// The names of package redispipe, which holds what the Redis stores share
// below their decisions, that the API of redisstore shows: the clients,
// what a check of a cluster found, what a refusal says.

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

// MasterState is what the last check of a cluster found of one master
// (redispipe, which keeps a cluster's topology, says what it holds).
type MasterState = redispipe.MasterState

// UnreachableError names the masters of a cluster that a check found
// unreachable (redispipe.UnreachableError).
type UnreachableError = redispipe.UnreachableError

// Setting is what of the client's settings a Redis that answered refused
// (redispipe, which reads Redis's errors, says what each is).
type Setting = redispipe.Setting

// The settings a Redis can refuse.
const (
	Credentials = redispipe.Credentials
	Database    = redispipe.Database
	TLS         = redispipe.TLS
	Permissions = redispipe.Permissions
)

// RefusedError is Ping's error when Redis is there but refuses the
// client's settings: no wait makes it answer, only a change of settings
// does. A configuration error, not an outage (redispipe.RefusedError).
type RefusedError = redispipe.RefusedError
