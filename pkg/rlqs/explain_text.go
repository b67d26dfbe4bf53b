package rlqs

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the explanation for a person to read: the id and its
// match, the limit, each client with its demand, share and token bucket,
// and the total against the limit.
func (b Bucket) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "domain:     %s", b.Domain)
	if !b.DomainKnown {
		sb.WriteString(" (unknown)")
	}
	entries := make([]string, len(b.Entries))
	for i, e := range b.Entries {
		entries[i] = e.Key + "=" + e.Value
	}
	fmt.Fprintf(&sb, "\nbucket id:  %s\n", strings.Join(entries, ", "))
	if b.Node != "" {
		fmt.Fprintf(&sb, "matched:    %s.%s", b.Domain, b.Node)
		if b.Line > 0 {
			fmt.Fprintf(&sb, " (line %d)", b.Line)
		}
		sb.WriteString("\n")
	}
	for _, r := range b.Rules {
		name := r.Name
		if name == "" {
			name = "(unnamed)"
		}
		if r.Unlimited {
			fmt.Fprintf(&sb, "rule:       %s: unlimited\n", name)
			continue
		}
		period := shortDuration(time.Duration(r.PeriodSeconds * float64(time.Second)))
		fmt.Fprintf(&sb, "rule:       %s: %d per %s (%s/s)\n", name, r.Requests, period, rate(float64(r.Requests)/r.PeriodSeconds))
	}
	fmt.Fprintf(&sb, "outcome:    %s\n", b.describe())
	if b.Outcome == OutcomeDivided || (b.Outcome == OutcomeShadow && b.RatePerSecond > 0) {
		b.writeDivision(&sb)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// describe says in words what the outcome means for Envoy.
func (b Bucket) describe() string {
	ttl := fmt.Sprintf(", TTL %ds", b.TTLSeconds)
	switch b.Outcome {
	case OutcomeUnknownDomain:
		return "no limits for this domain: ALLOW_ALL" + ttl
	case OutcomeNoMatch:
		return "no limit matches (no walk of the tree takes every entry): ALLOW_ALL" + ttl
	case OutcomeNoLimit:
		return "the walk ends on a node without a limit: ALLOW_ALL" + ttl
	case OutcomeUnlimited:
		return "unlimited: ALLOW_ALL" + ttl
	case OutcomeDeny:
		return "a limit of 0 requests: DENY_ALL" + ttl
	case OutcomeShadow:
		if b.RatePerSecond > 0 {
			return "shadow mode: ALLOW_ALL" + ttl + "; divided below only for the metrics, as it would be"
		}
		return "shadow mode: ALLOW_ALL" + ttl
	}
	return fmt.Sprintf("%s/s divided among the bucket's clients, each sent its share as a token bucket%s", rate(b.RatePerSecond), ttl)
}

func (b Bucket) writeDivision(sb *strings.Builder) {
	fmt.Fprintf(sb, "key:        %s\n", b.Key)
	store := "embedded: the demands of this process's streams only"
	if b.Store == "shared" {
		store = "shared: every instance's demands"
		if b.StoreKey != "" {
			store += ", in " + b.StoreKey
		}
	}
	fmt.Fprintf(sb, "demands:    %s\n", store)
	if b.StoreError != "" {
		fmt.Fprintf(sb, "store error: %s (shares: this instance's last known part of the limit, among its own clients)\n", b.StoreError)
	}
	fmt.Fprintf(sb, "clients:    %d live\n", len(b.Clients))
	if len(b.Clients) > 0 {
		tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  CLIENT\tHERE\tDEMAND/S\tSHARE/S\tTOKEN BUCKET\tASSIGNED/S")
		for _, c := range b.Clients {
			demand := "unknown"
			if c.DemandPerSecond != nil {
				demand = rate(*c.DemandPerSecond)
			}
			tb := "none: DENY_ALL"
			if t := c.TokenBucket; t != nil {
				tb = fmt.Sprintf("%d every %ds, max %d (%s/s)", t.TokensPerFill, t.FillIntervalSeconds, t.MaxTokens, rate(t.RatePerSecond))
			}
			assigned := "-"
			if c.AssignedPerSecond != nil {
				assigned = rate(*c.AssignedPerSecond)
			}
			here := "no"
			if c.Here {
				here = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.ID, here, demand, rate(c.SharePerSecond), tb, assigned)
		}
		tw.Flush() //nolint:errcheck // a strings.Builder does not fail
	}
	fmt.Fprintf(sb, "total:      shares %s/s, token buckets %s/s, of a limit of %s/s\n",
		rate(b.TotalPerSecond), rate(b.TokenBucketsPerSecond), rate(b.RatePerSecond))
}

// rate prints a rate with up to three decimals, without trailing zeros.
func rate(v float64) string {
	s := strings.TrimRight(strconv.FormatFloat(v, 'f', 3, 64), "0")
	return strings.TrimSuffix(s, ".")
}

// shortDuration is d without its zero minutes and seconds: 1h, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
