package config

import (
	"fmt"
	"slices"
	"strings"
)

// Lines renders c for the /rlconfig endpoint: one line per limit, unlimited
// ones included, sorted, each in the form
//
//	KEY[INDEX]: LIMIT [name=NAME] shadow_mode=BOOL [quota_mode=true] [failure_mode=MODE] [count_refused=true] [replaces=NAME,NAME…] [warn_at=F,F…]
//
// KEY is the descriptor's composite key as envoyproxy/ratelimit writes it,
// DOMAIN.KEY[_VALUE][.KEY[_VALUE]]…; INDEX, as in "api.user[1]", is the
// limit's place in a rate_limits list of several limits, from 0, and is
// left out for a descriptor with one limit. LIMIT is "unlimited" or the
// limits.Limit's String without its count_refused, such as
// "sliding_window 10/1m0s", "token_bucket 10/1s burst=20" or
// "leaky_bucket 10/1s burst=0". The bracketed fields appear only when set,
// always in this order, so that the output is stable and diffs between two
// reloads show what changed. For example:
//
//	api.path_/users.method_GET: token_bucket 10/1s burst=20 name=users shadow_mode=false
//	api.remote_address: unlimited shadow_mode=true
//	api.user[0]: sliding_window 10/1s shadow_mode=false
//	api.user[1]: fixed_window 10000/24h0m0s shadow_mode=false count_refused=true
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
		for i, r := range d.Rules {
			if len(d.Rules) > 1 {
				lines = append(lines, fmt.Sprintf("%s[%d]: %s", key, i, r.line(d)))
			} else {
				lines = append(lines, key+": "+r.line(d))
			}
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
		l := r.Limit
		l.CountRefused = false // count_refused=true below
		b.WriteString(l.String())
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
	for i, t := range r.WarnAt {
		if i == 0 {
			b.WriteString(" warn_at=")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(FormatFraction(t))
	}
	if c := r.Candidate; c != nil {
		l := c.Limit
		l.CountRefused = false
		fmt.Fprintf(&b, " candidate=%q", l.String())
	}
	return b.String()
}
