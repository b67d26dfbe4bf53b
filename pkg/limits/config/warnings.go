package config

import (
	"fmt"
	"slices"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Warnings lists what c holds that loads and is served but is most likely
// not what its author meant, one line each naming the file, line and
// limit, with the reason: check-config and lint print them, the server
// logs them at every load. Each is a modifier's (limits.Warnings): a
// warning, not an error, for what loaded before, which a refusal would
// stop a server that served it from serving at its next start.
func (c *Config) Warnings() []string {
	var ws []string
	for _, d := range c.Domains {
		ws = appendWarnings(ws, d.File, d.Name, d.Descriptors)
	}
	slices.Sort(ws)
	return ws
}

func appendWarnings(ws []string, file, parent string, ds []*Descriptor) []string {
	for _, d := range ds {
		key := compositeKey(parent, d.Key, d.Value)
		for _, r := range d.Rules {
			if r.Unlimited {
				continue
			}
			for _, w := range limits.Warnings(r.Limit) {
				ws = append(ws, fmt.Sprintf("%s: %s: %s", place(file, r.Line), key, w))
			}
		}
		ws = appendWarnings(ws, file, key, d.Descriptors)
	}
	return ws
}
