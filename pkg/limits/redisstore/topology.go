package redisstore

import "github.com/envoy-rls/envoy-rls/internal/redispipe"

// MasterState is what the last check of a cluster found of one master
// (redispipe, which keeps a cluster's topology, says what it holds).
type MasterState = redispipe.MasterState

// UnreachableError names the masters of a cluster that a check found
// unreachable (redispipe.UnreachableError).
type UnreachableError = redispipe.UnreachableError
