package config

import "fmt"

// Counts is how much a config holds, counted in one place so that every
// command that reports it (check-config, lint) gives the same numbers.
type Counts struct {
	Domains int
	// Limits are the rate_limit bodies: one per `rate_limit`, one per entry
	// of a `rate_limits` list, at any depth, unlimited ones included (they
	// are limits a request can match, and they stop a walk).
	Limits int
	// Unlimited are the Limits that say `unlimited: true`.
	Unlimited int
	// Descriptors are the descriptors that hold at least one limit; a
	// descriptor that only leads to nested ones is not counted.
	Descriptors int
}

// Count counts every domain of c.
func (c *Config) Count() Counts {
	var n Counts
	for _, d := range c.Domains {
		n.add(d.Count())
	}
	return n
}

// Count counts one domain; its Domains is 1.
func (d *Domain) Count() Counts {
	n := Counts{Domains: 1}
	n.descriptors(d.Descriptors)
	return n
}

func (n *Counts) descriptors(ds []*Descriptor) {
	for _, d := range ds {
		if len(d.Rules) > 0 {
			n.Descriptors++
		}
		for _, r := range d.Rules {
			n.Limits++
			if r.Unlimited {
				n.Unlimited++
			}
		}
		n.descriptors(d.Descriptors)
	}
}

func (n *Counts) add(m Counts) {
	n.Domains += m.Domains
	n.Limits += m.Limits
	n.Unlimited += m.Unlimited
	n.Descriptors += m.Descriptors
}

// String says what was counted, so that a reader need not guess whether a
// rate_limits list is one limit or several: "2 domains, 5 limits (1
// unlimited) on 4 descriptors".
func (n Counts) String() string {
	return fmt.Sprintf("%s, %s (%d unlimited) on %s",
		countOf(n.Domains, "domain"), countOf(n.Limits, "limit"), n.Unlimited, countOf(n.Descriptors, "descriptor"))
}

func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
