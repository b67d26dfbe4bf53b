package rlqs

import (
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// A concurrency limit counts the requests in flight: a hit takes a slot
// and the request's end gives it back. RLQS has neither: Envoy reports how
// many requests a bucket allowed and enforces the token bucket it is
// assigned, and no rate of tokens bounds how many requests are in flight at
// once (that is their rate times how long each lasts). So RLQS does not
// enforce concurrency limits: a bucket is divided by the descriptor's other
// rules, and one whose rules are all concurrency limits is answered
// ALLOW_ALL. Refusing such a bucket (DENY_ALL) would turn a limit meant to
// shed overload into one that refuses every request; refusing the whole
// config would stop RLS, which does enforce it, from loading it. A
// stream whose bucket matches one is told of in the log, once per limit
// (caveats.go), and docs/rlqs.md documents it.

// unenforced reports whether RLQS leaves rule r out of a bucket's rate.
func unenforced(r *config.Rule) bool {
	return !r.Unlimited && r.Limit.Algorithm == limits.Concurrency
}
