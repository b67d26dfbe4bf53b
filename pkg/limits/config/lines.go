package config

import (
	"fmt"
	"slices"
	"strings"
)

// Lines renders c for the /rlconfig endpoint: one line per limit, unlimited
// ones included, sorted, each in the form
//
//	KEY: LIMIT [name=NAME] shadow_mode=BOOL [quota_mode=true] [failure_mode=MODE] [count_refused=true] [replaces=NAME,NAME…]
//
// KEY is the descriptor's composite key as envoyproxy/ratelimit writes it,
// DOMAIN.KEY[_VALUE][.KEY[_VALUE]]…; LIMIT is "unlimited" or the
// limits.Limit's String, such as "sliding_window 10/1m0s" or
// "token_bucket 10/1s burst=20". The bracketed fields appear only when set,
// always in this order, so that the output is stable and diffs between two
// reloads show what changed. A descriptor with several limits has several
// lines with the same KEY. For example:
//
//	api.path_/users.method_GET: token_bucket 10/1s burst=20 name=users shadow_mode=false
//	api.remote_address: unlimited shadow_mode=true
func (c *Config) Lines() []string {
	if c == nil {
		return nil
	}
	var lines []string
	for _, d := range c.Domains {
		lines = appendLines(lines, d.Name, d.Descriptors)
	}
	slices.Sort(lines)
	return lines
}

func appendLines(lines []string, parent string, ds []*Descriptor) []string {
	for _, d := range ds {
		key := compositeKey(parent, d.Key, d.Value)
		for _, r := range d.Rules {
			lines = append(lines, key+": "+r.line(d))
		}
		lines = appendLines(lines, key, d.Descriptors)
	}
	return lines
}

// line is the part of a Lines line after the key.
func (r *Rule) line(d *Descriptor) string {
	var b strings.Builder
	if r.Unlimited {
		b.WriteString("unlimited")
	} else {
		b.WriteString(r.Limit.String())
	}
	if r.Name != "" {
		fmt.Fprintf(&b, " name=%s", r.Name)
	}
	fmt.Fprintf(&b, " shadow_mode=%t", d.ShadowMode)
	if d.QuotaMode {
		b.WriteString(" quota_mode=true")
	}
	if r.FailureMode != FailureModeDefault {
		fmt.Fprintf(&b, " failure_mode=%s", r.FailureMode)
	}
	if r.CountRefused {
		b.WriteString(" count_refused=true")
	}
	if len(r.Replaces) > 0 {
		fmt.Fprintf(&b, " replaces=%s", strings.Join(r.Replaces, ","))
	}
	return b.String()
}
