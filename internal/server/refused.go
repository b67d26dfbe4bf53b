package server

import (
	"errors"
	"net/url"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// refusedStore is a Redis that answers but refuses the service's settings
// (redisstore.RefusedError), told in the settings the operator set: a
// configuration error, not an outage, which health reports (Refused)
// until the settings change.
type refusedStore struct {
	settings string // what to fix, as the operator set it
	err      *redisstore.RefusedError
}

func (e *refusedStore) Error() string {
	return "a configuration error, not an outage: " + e.err.Error() + "; check " + e.settings
}

func (e *refusedStore) Unwrap() error { return e.err }

// Refused tells package httpapi's health that the store is unhealthy, not
// merely unreachable.
func (e *refusedStore) Refused() bool { return true }

// refusal is err as a *refusedStore when Redis refused the settings, else
// err.
func (o *Options) refusal(err error) error {
	var re *redisstore.RefusedError
	if !errors.As(err, &re) {
		return err
	}
	return &refusedStore{settings: o.refusedSettings(re.Setting), err: re}
}

// refusedSettings names the settings behind what Redis refused: where the
// credentials, the database index or TLS come from.
func (o *Options) refusedSettings(s redisstore.Setting) string {
	u, _ := url.Parse(o.redisURL)
	var names []string
	add := func(set bool, flag string) {
		if set {
			names = append(names, o.setting(flag))
		}
	}
	switch s {
	case redisstore.Credentials:
		add(u != nil && u.User != nil, "redis-url")
		add(o.redisUsername != "", "redis-username")
		add(o.redisPasswordFile != "", "redis-password-file")
		add(o.redisPassword != "" && o.redisPasswordFile == "", "redis-password")
		if len(names) == 0 {
			return "no password is set: " + o.setting("redis-password")
		}
	case redisstore.Database:
		add(true, "redis-url")
	case redisstore.Permissions:
		return "the ACL rules of the Redis user (" + o.setting("redis-username") + "): the error names those to add"
	case redisstore.TLS:
		add(o.redisURL != "", "redis-url")
		add(o.redisTLS, "redis-tls")
		add(o.redisTLSCA != "", "redis-tls-ca")
		add(o.redisTLSCert != "", "redis-tls-cert")
		if !o.redisTLS && (u == nil || u.Scheme != "rediss") {
			names = append(names, o.setting("redis-tls"))
		}
	}
	return strings.Join(names, ", ")
}
