// Package breaker stops waiting on a store that is down. A rate limiter sits
// on every request's path: when Redis dies, each call would otherwise wait
// for its timeout (50 ms by default, more than Envoy's 20 ms deadline)
// before the failure mode applies. Once calls have kept finding the store
// unavailable, the breaker opens and answers at once with ErrOpen; it lets
// one call through now and then to probe, and the first success closes it
// again.
//
// New wraps a limits.Store in a Breaker, itself a limits.Store: put it
// between the service and the shared store. Circuit is the same state
// machine apart from a store, for a caller that guards something else
// (the Redis store keeps one per cluster master). The breaker decides no
// hit itself: an open breaker's ErrOpen is a store failure, and the
// service's failure mode answers it.
//
// When it opens. A failed call is weak evidence on its own: a Redis that
// stalls for a moment (a fork, a slow command, a paused VM) or a service
// starved of CPU makes every call in flight time out together, and they all
// report within moments of each other. Counting those as failures in a row
// would open the breaker on a stall that is over before the first probe,
// and answer by the failure mode until that probe: an outage of the
// breaker's own making. So the breaker opens only on failures that span
// time: Failures calls in a row find the store unavailable, and the latest
// is recorded at least Timeout after the first. A call is never given more
// than Timeout, so a failure recorded that late came from a call made after
// the first failure was known: fresh evidence, not the same stall seen
// twice. A stall must thus outlast about two store timeouts to open the
// breaker (one for the first calls to time out, one for a call made after
// that to time out too), and a store that refuses connections one store
// timeout; anything shorter costs only the calls it caught, which take the
// failure mode after their timeout as they would without a breaker.
//
// A store that can tell (Answering) is asked, when a call's hits all
// timed out, whether it has answered anything within the last Timeout:
// if it has (a slow round trip, a connection's handshake at start, and
// the store's work aside came back), the call proves it slow, not down,
// and counts for nothing. A store that hangs answers nothing, and opens
// the breaker about a store timeout later than it would otherwise; one
// that refuses connections is down at once, as before.
//
// When it probes. The first probe goes Timeout after the breaker opens, so
// that a store back from a short outage is used again soon after its
// return; each failed probe doubles the wait, up to Cooldown, so that a
// store that stays down sees one call per Cooldown. Every opening starts
// again from Timeout.
//
// The closed breaker's path, the one every call takes while the store
// answers, reads two atomic flags and takes no lock and no clock reading;
// an open breaker refuses with a clock reading and no lock.
package breaker
