// Package statsd pushes envoyproxy/ratelimit's stats to a statsd, as
// envoyproxy/ratelimit's USE_STATSD (plain statsd, over TCP by default)
// and USE_DOG_STATSD (DogStatsD, with tags, over UDP) push them: on an
// interval, each counter as what it counted since the last flush, each
// gauge as its value, each response time as one sample
// (metrics.FlushStatsd hands them over).
//
// A push never holds a decision: the decisions count into atomic
// counters, and only the pusher's own goroutine (and, for DogStatsD, the
// client's sender) waits on the network, each write bounded by a timeout.
// A statsd that is down or slow loses the stats it did not take, which
// are counted (rls_statsd_dropped_total); the pusher then tries again at
// the next flush, not before, and logs at most one line a flush: when
// stats start being dropped, and when they go through again.
package statsd
