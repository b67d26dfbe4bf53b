package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// writeModifiers lists the limits of c whose modifiers describe them
// (limits.Modifier.Describe), one line each, "  MODIFIER: KEY: WHAT",
// so that a field written wrong shows before it counts (such as the
// window a limit is in at now).
func writeModifiers(w io.Writer, c *config.Config, now time.Time) {
	var lines []string
	for _, d := range c.Domains {
		lines = modifierLines(lines, d.Name, d.Descriptors, now)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func modifierLines(lines []string, parent string, ds []*config.Descriptor, now time.Time) []string {
	for _, d := range ds {
		key := parent + "." + d.Key
		if d.Value != "" {
			key += "_" + d.Value
		}
		for _, r := range d.Rules {
			if r.Unlimited {
				continue
			}
			for _, m := range limits.Modifiers {
				if m.Describe != nil && m.On(r.Limit) {
					lines = append(lines, fmt.Sprintf("  %s: %s: %s", m.Name, key, m.Describe(r.Limit, now.UnixMicro())))
				}
			}
		}
		lines = modifierLines(lines, key, d.Descriptors, now)
	}
	return lines
}
