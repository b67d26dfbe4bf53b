package rlqs

import (
	"fmt"
	"sort"

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
// config would stop RLS, which does enforce it, from loading it. The
// server says so at every load (Unenforced) and docs/rlqs.md documents it.

// unenforced reports whether RLQS leaves rule r out of a bucket's rate.
func unenforced(r *config.Rule) bool {
	return !r.Unlimited && r.Limit.Algorithm == limits.Concurrency
}

// Unenforced lists the rules of cfg that RLQS does not enforce, each as
// "file:line (domain)", by domain, in file order: what the server logs at load.
func Unenforced(cfg *config.Config) []string {
	var out []string
	var walk func(d *config.Domain, ds []*config.Descriptor)
	walk = func(d *config.Domain, ds []*config.Descriptor) {
		for _, desc := range ds {
			for _, r := range desc.Rules {
				if unenforced(r) {
					out = append(out, fmt.Sprintf("%s:%d (%s)", d.File, r.Line, d.Name))
				}
			}
			walk(d, desc.Descriptors)
		}
	}
	names := make([]string, 0, len(cfg.Domains))
	for name := range cfg.Domains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		walk(cfg.Domains[name], cfg.Domains[name].Descriptors)
	}
	return out
}
