package server

import (
	"flag"

	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// answerOptions say what an answer carries beside the statuses, and in
// which form: envoyproxy/ratelimit's (the drop-in sets these) or
// envoy-rls's own.
type answerOptions struct {
	quotaMode        bool
	dynamicMetadata  bool
	ratelimitHeaders bool
	headerNames      rls.RatelimitHeaderNames
	ratelimitCompat  bool
}

// answerFlags defines them, for the server and for explain alike.
func answerFlags(fs *flag.FlagSet, a *answerOptions) {
	def := rls.DefaultRatelimitHeaderNames
	fs.BoolVar(&a.quotaMode, "quota-mode", false, "treat every descriptor as quota_mode: one over keeps its OVER_LIMIT status, and the request is refused only when every quota-mode descriptor is over")
	fs.BoolVar(&a.dynamicMetadata, "dynamic-metadata", false, "fill every answer's dynamic_metadata with the domain, the descriptors, the hits and the merged metadata of the descriptors that passed, as envoyproxy/ratelimit does")
	fs.BoolVar(&a.ratelimitHeaders, "ratelimit-headers", false, "add envoyproxy/ratelimit's limit, remaining and reset headers of the most restrictive descriptor to every answer")
	fs.StringVar(&a.headerNames.Limit, "ratelimit-header-limit", def.Limit, "name of -ratelimit-headers' limit header")
	fs.StringVar(&a.headerNames.Remaining, "ratelimit-header-remaining", def.Remaining, "name of -ratelimit-headers' remaining header")
	fs.StringVar(&a.headerNames.Reset, "ratelimit-header-reset", def.Reset, "name of -ratelimit-headers' reset header")
	fs.BoolVar(&a.ratelimitCompat, "ratelimit-compat", false, "answer with envoyproxy/ratelimit's profile where the two differ: duration_until_reset in whole seconds, a fixed window's at its end, each listing of one counter decided on its own, -shadow-mode turning only the overall code to OK")
}

// apply sets the rls options they stand for.
func (a *answerOptions) apply(so *rls.Options) {
	so.QuotaMode = a.quotaMode
	so.DynamicMetadata = a.dynamicMetadata
	so.Profile = a.profile()
	if a.ratelimitHeaders {
		so.Headers = append(so.Headers, rls.RatelimitHeaders(a.headerNames))
	}
}

// profile is the rls.Profile the flags choose: envoyproxy/ratelimit's with
// -ratelimit-compat (on in the drop-in, which takes its limits' defaults
// from the same profile: dropInDefaults), else envoy-rls's own.
func (a *answerOptions) profile() rls.Profile {
	if a.ratelimitCompat {
		return rls.RatelimitProfile
	}
	return rls.NativeProfile
}
