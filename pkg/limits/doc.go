// Package limits holds what a rate limit is and how it is decided: the
// Limit value type, the five algorithms as pure functions of
// (state, limit, cost, now), and the Store contract that every backend
// (the embedded store in package memory, Redis in package redisstore)
// implements with the same semantics.
//
// Use Decide or DecideWithin to decide a hit on a state one keeps oneself,
// with time passed in; use a Store (Store.Decide, a batch of Hit into
// their Result) to decide on shared state, and write a Store of one's own
// against the conformance suite in package storetest. A Limit comes from a
// loaded config (package config builds them); this package parses no
// files, matches no descriptors (package descriptors) and reads no clock.
//
// Time is integer microseconds everywhere a decision is computed; every
// store decides with the functions here, on the state it keeps, so that all
// make the same decision for the same sequence of requests.
package limits
