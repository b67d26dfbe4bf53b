// Package config loads limits into an immutable snapshot, from two sources
// checked by one validator: limits files, in the envoyproxy/ratelimit YAML
// format plus envoy-rls's additions, parsed strictly (an unknown field, a
// typo, a duplicate is an error naming file, line and word); and the
// RateLimitConfig messages of an xDS server (FromProto), whose errors name
// the resource and the field's path instead.
//
// Load reads a file or a directory of them into a Config; Parse reads one
// file's bytes into a Domain, and Options.FromProto one xDS resource. An
// error is an *Error that names where it stands. A Config is safe to share
// and never changes: a reload loads a new one, and on an error the caller
// keeps the old. It does not watch files or decide anything: hand the
// Config to descriptors.NewIndex, and the index to package rls or rlqs.
package config
