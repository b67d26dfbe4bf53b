package rlqs

import (
	"fmt"
	"slices"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// An RLQS bucket is enforced by Envoy, with the token bucket this service
// assigns it: a share of the limit's rate, the same for every key of the
// bucket, refilled continuously. A lockout (block_for) keeps one key
// refused for a while after its own refusal, which no token bucket can
// express (it would have to stop refilling for that key alone, and Envoy
// does not tell this service which request was refused). So an RLQS
// bucket of a lockout is divided as the plain limit's rate, without the
// lock (rulesRate reads Requests and Period alone), and the load says so
// (Lockouts), rather than refusing a config that the RLS path enforces in
// full.

// Lockouts names the limits of cfg that have a block_for, as
// "FILE:LINE: DOMAIN: block_for 15m0s", sorted: what an RLQS bucket
// enforces without its lock, which the service logs at each load.
func Lockouts(cfg *config.Config) []string {
	var out []string
	var walk func(d *config.Domain, ds []*config.Descriptor)
	walk = func(d *config.Domain, ds []*config.Descriptor) {
		for _, n := range ds {
			for _, r := range n.Rules {
				if r.Limit.BlockFor > 0 {
					out = append(out, fmt.Sprintf("%s:%d: %s: block_for %s", d.File, r.Line, d.Name, r.Limit.BlockFor))
				}
			}
			walk(d, n.Descriptors)
		}
	}
	for _, d := range cfg.Domains {
		walk(d, d.Descriptors)
	}
	slices.Sort(out)
	return out
}
