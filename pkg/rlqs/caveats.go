package rlqs

import (
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// caveats says, once per limit, that a quota stream asked for a limit
// RLQS holds only in part: a concurrency limit, left out of the bucket's
// rate (concurrency.go), at warn; a modifier that RLQS holds only in
// part, as its entry in limits.Modifiers says (Modifier.RLQS), at info. It
// is said when a stream's bucket first matches
// such a limit, not at each load: a limits file whose concurrency limits
// only ShouldRateLimit asks about (the usual case, and the repository's
// own config/limits.yaml) is enforced in full, and a warning at every
// start would teach operators to ignore warnings.
type caveats struct {
	mu   sync.Mutex
	said map[ruleID]bool // each limit said
}

// ruleID names a limit across reloads: its file, line and domain, a key
// that looking up allocates nothing, since a report asks at each bucket.
type ruleID struct {
	file, domain string
	line         int
}

// note logs the caveats of the rules of end, the node of domain in ix a
// bucket matched, each the first time.
func (c *caveats) note(log *zap.Logger, ix *descriptors.Index, domain string, end *descriptors.Node) {
	for _, r := range end.Descriptor.Rules {
		concurrency := unenforced(r)
		if !concurrency && !slices.ContainsFunc(limits.Modifiers, func(m limits.Modifier) bool { return partly(m, r.Limit) }) {
			continue
		}
		id := ruleID{file: fileOf(ix.Config(), domain), domain: domain, line: r.Line}
		c.mu.Lock()
		done := c.said[id]
		if !done {
			if c.said == nil {
				c.said = make(map[ruleID]bool)
			}
			c.said[id] = true
		}
		c.mu.Unlock()
		if done {
			continue
		}
		at := fmt.Sprintf("%s:%d (%s)", id.file, id.line, id.domain)
		if concurrency {
			log.Warn("rlqs: a quota stream asks for a concurrency limit, which RLQS cannot enforce (a token bucket cannot bound the requests in flight): its bucket is divided by the descriptor's other limits, or answered ALLOW_ALL when it has none; ShouldRateLimit enforces it (docs/rlqs.md)",
				zap.String("limit", at))
			continue
		}
		for _, m := range limits.Modifiers {
			if partly(m, r.Limit) {
				log.Info("rlqs: "+m.RLQS, zap.String("limit", at), zap.Any(m.Fields[0].Name, m.Value(r.Limit)))
			}
		}
	}
}

// partly reports whether l has modifier m and RLQS holds m only in part.
func partly(m limits.Modifier, l limits.Limit) bool { return m.RLQS != "" && m.On(l) }

// fileOf is the file of domain in cfg, "" for none.
func fileOf(cfg *config.Config, domain string) string {
	if d := cfg.Domains[domain]; d != nil {
		return d.File
	}
	return ""
}
