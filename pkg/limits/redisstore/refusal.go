package redisstore

import "github.com/envoy-rls/envoy-rls/internal/redispipe"

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
