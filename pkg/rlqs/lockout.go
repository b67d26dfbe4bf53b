package rlqs

// An RLQS bucket is enforced by Envoy, with the token bucket this service
// assigns it: a share of the limit's rate, the same for every key of the
// bucket, refilled continuously. A lockout (block_for) keeps one key
// refused for a while after its own refusal, which no token bucket can
// express (it would have to stop refilling for that key alone, and Envoy
// does not tell this service which request was refused). So an RLQS
// bucket of a lockout is divided as the plain limit's rate, without the
// lock (rulesRate reads Requests and Period alone), and the log says so
// when a stream first asks for one (caveats.go), rather than refusing a
// config that the RLS path enforces in full.
