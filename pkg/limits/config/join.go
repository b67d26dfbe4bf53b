package config

import "strconv"

// Join puts domains read from other sources than files (the resources of
// an xDS snapshot, each checked by FromProto) into one Config, in the
// given order, by Load's rule: a domain that two of them define is an
// error naming both, or with MergeDomains one domain whose top-level
// descriptors are theirs, a top-level descriptor defined twice being an
// error naming both. Each Domain's File names its source. Join takes the
// domains over: a merged domain is the first one, grown.
func (o Options) Join(domains []*Domain) (*Config, error) {
	c := &Config{Domains: make(map[string]*Domain, len(domains))}
	tops := topLevel{}
	for _, d := range domains {
		if o.MergeDomains {
			if err := tops.add(d); err != nil {
				return nil, err
			}
		}
		switch first, dup := c.Domains[d.Name]; {
		case dup && o.MergeDomains:
			first.Descriptors = append(first.Descriptors, d.Descriptors...)
		case dup:
			return nil, &Error{File: d.File, Word: d.Name, Msg: "duplicate domain, first in " + first.File}
		default:
			c.Domains[d.Name] = d
		}
	}
	return c, nil
}

// place is where a descriptor was defined, for an error: FILE:LINE, or
// the source's name alone when it has no lines (an xDS resource).
func place(source string, line int) string {
	if line == 0 {
		return source
	}
	return source + ":" + strconv.Itoa(line)
}
