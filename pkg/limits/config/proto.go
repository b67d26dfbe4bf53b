package config

import (
	"fmt"
	"strings"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// FromProto reads one RateLimitConfig, the resource an xDS server sends
// (go-control-plane's ratelimit module), into a Domain, checked by the same
// rules as a limits file: the limits a file would give for the same
// fields, and the same errors. resource names the message in Domain.File
// and in errors, as a file's path does; where a file's errors give a line,
// a message's give the field's path, as in
//
//	api-limits: descriptors[0].rate_limit: has no unit
//
// The message has a subset of the file's fields (no algorithm, burst,
// unit_multiplier, failure_mode, count_refused, the modifiers' fields or
// rate_limits), so its
// limits have the file's defaults for those; nor has it a domain's holds,
// so a domain from xDS never has any (Domain.Holds is nil). In proto3 a
// zero is no value: an empty domain or key and unit UNKNOWN read as
// missing. requests_per_unit is the exception: 0 is a block rule, as it is
// in a file and in envoyproxy/ratelimit, so a rate_limit that is not
// unlimited always has one. FromProto checks the message against
// DefaultOptions.
func FromProto(resource string, m *rlsconfv3.RateLimitConfig) (*Domain, error) {
	return DefaultOptions().FromProto(resource, m)
}

// FromProto is the package's FromProto, checking the message against o.
func (o Options) FromProto(resource string, m *rlsconfv3.RateLimitConfig) (*Domain, error) {
	d, err := o.validator().domain(resource, protoDomain(m))
	if err != nil {
		return nil, inFile(resource, err)
	}
	return d, nil
}

// protoDomain maps a message to the raw model, field for field, each at
// its path.
func protoDomain(m *rlsconfv3.RateLimitConfig) *rawDomain {
	return &rawDomain{
		name:        protoField(m.GetDomain(), m.GetDomain() != "", "domain", "domain"),
		descriptors: protoDescriptors(m.GetDescriptors(), "descriptors", 1),
	}
}

// protoDescriptors maps the descriptors at path, at depth (1 for a
// domain's). It maps none below MaxDepth+1, the first level the validator
// refuses: each level's path is longer than its parent's, and a tree of
// thousands of levels would take the square of that in paths.
func protoDescriptors(ms []*rlsconfv3.RateLimitDescriptor, path string, depth int) []*rawDescriptor {
	var ds []*rawDescriptor
	for i, m := range ms {
		at := fmt.Sprintf("%s[%d]", path, i)
		d := &rawDescriptor{
			at:             pos{name: "descriptors", path: at},
			key:            protoField(m.GetKey(), m.GetKey() != "", "key", at+".key"),
			value:          m.GetValue(),
			shadowMode:     m.GetShadowMode(),
			detailedMetric: m.GetDetailedMetric(),
			quotaMode:      m.GetQuotaMode(),
			metadata:       m.GetMetadata(),
		}
		if depth <= MaxDepth {
			d.descriptors = protoDescriptors(m.GetDescriptors(), at+".descriptors", depth+1)
		}
		if p := m.GetRateLimit(); p != nil {
			r := protoRule(p, at+".rate_limit")
			d.rateLimit = field[*rawRule]{r, r.at, true}
		}
		ds = append(ds, d)
	}
	return ds
}

func protoRule(m *rlsconfv3.RateLimitPolicy, path string) *rawRule {
	unit := m.GetUnit()
	r := &rawRule{
		at:              pos{name: "rate_limit", path: path},
		name:            m.GetName(),
		requestsPerUnit: protoField(int64(m.GetRequestsPerUnit()), !m.GetUnlimited(), "requests_per_unit", path+".requests_per_unit"),
		unit:            protoField(strings.ToLower(unit.String()), unit != rlsconfv3.RateLimitUnit_UNKNOWN, "unit", path+".unit"),
		unlimited:       protoField(m.GetUnlimited(), m.GetUnlimited(), "unlimited", path+".unlimited"),
	}
	for i, e := range m.GetReplaces() {
		r.replaces = append(r.replaces, protoField(e.GetName(), true, "replaces", fmt.Sprintf("%s.replaces[%d]", path, i)))
	}
	return r
}

// protoField is the value v of the field name at path, set when the
// message has it.
func protoField[T any](v T, set bool, name, path string) field[T] {
	return field[T]{v: v, at: pos{name: name, path: path}, set: set}
}
