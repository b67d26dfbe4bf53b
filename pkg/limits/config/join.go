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
	j := o.joiner(len(domains))
	for _, d := range domains {
		if err := j.add(d, 0); err != nil {
			return nil, err
		}
	}
	return j.c, nil
}

// joiner builds a Config one domain at a time, by Load's and Join's rule.
type joiner struct {
	merge bool
	c     *Config
	lines map[string]int // the line of each domain's first definition, 0 for none
	tops  topLevel
}

func (o Options) joiner(n int) *joiner {
	return &joiner{merge: o.MergeDomains, c: &Config{Domains: make(map[string]*Domain, n)},
		lines: make(map[string]int, n), tops: topLevel{}}
}

// add joins d, whose `domain:` key is at line (0 where it has no lines).
func (j *joiner) add(d *Domain, line int) error {
	if j.merge {
		if err := j.tops.add(d); err != nil {
			return err
		}
	}
	switch first, dup := j.c.Domains[d.Name]; {
	case dup && j.merge:
		if err := sameHolds(first, d); err != nil {
			return err
		}
		first.Descriptors = append(first.Descriptors, d.Descriptors...)
	case dup:
		return &Error{File: d.File, Line: line, Word: d.Name, Msg: "duplicate domain, first in " + place(first.File, j.lines[d.Name])}
	default:
		j.c.Domains[d.Name] = d
		j.lines[d.Name] = line
	}
	return nil
}

// place is where a descriptor was defined, for an error: FILE:LINE, or
// the source's name alone when it has no lines (an xDS resource).
func place(source string, line int) string {
	if line == 0 {
		return source
	}
	return source + ":" + strconv.Itoa(line)
}
