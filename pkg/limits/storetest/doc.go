// Package storetest is the conformance suite of limits.Store: one table of
// cases, run against every store (the embedded one and Redis), so that all of
// them decide exactly as docs/semantics.md says and as limits.DecideWithin
// computes, joint runs of hits included.
//
// A store's test calls Run with a Factory that makes a fresh store on the
// suite's clock; a store of one's own passes it to be interchangeable with
// the others. Holders races goroutines on one concurrency limit's key, to
// find slots given twice or never given back; Recording wraps a store to
// remember the keys it was asked to decide, for tests of what reaches a
// store. It is for tests only: it
// imports package testing.
//
// The suite owns the clock. A store under test must read the clock it is
// given once per Decide call instead of its own; Run advances it between
// calls, so every case runs at fixed instants.
//
// A store converts Hit.MaxDelay to DecideWithin's microseconds as
// Hit.MaxDelayMicros does; the suite's deadlines are whole milliseconds.
package storetest
