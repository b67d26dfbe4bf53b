// Package descriptors maps the descriptors Envoy sends onto the limits of a
// loaded config, and names the store key each one is counted under.
//
// NewIndex prepares a config.Config for matching; the Index is immutable
// and shared by every request until a reload builds the next. Index.Match
// walks a request's ordered entries (Entry) to the config node (Node)
// whose limit applies, Index.MatchSet an RLQS bucket id's unordered ones;
// Key and KeyTag name a matched limit's store key, with its Redis Cluster
// hash tag, and AppendStatKey its envoyproxy/ratelimit stat name. Package
// rls and package rlqs do this for each request; use it directly to match
// or key descriptors outside them. It decides nothing: what a limit
// allows is package limits' matter.
//
// # How a descriptor is matched
//
// Matching follows envoyproxy/ratelimit: walk the request's entries level by
// level; at each level try the exact key and value, then the `*` wildcard
// values in config order, then the bare key (one counter per distinct value).
// One walker (walk.go) does it for a request's ordered entries (Match), an
// RLQS bucket id's unordered ones (MatchSet) and lint's partly known ones.
// The first wildcard in config order that matches wins; an index built at
// load, by each pattern's literal prefix or suffix, finds it without trying
// those that cannot match for want of that prefix or suffix, however many a
// config holds. A limit applies only where the walk ends on the last entry.
package descriptors
