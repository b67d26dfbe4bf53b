package config

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// A domain's `holds: {id: KEY, settle: KEY, lease: DURATION}` makes its
// descriptors reserve a request's cost when the request starts and settle
// it when it ends (limits.Hold, docs/holds.md). The service takes the
// entries of those two keys out of each descriptor before the walk: they
// name the request and the call, not what is counted, so a descriptor that
// matched on one of them could never be reached, and is refused.

// Holds is what a domain's holds field declares.
type Holds struct {
	// ID is the key of the entry that names the request (Envoy's
	// x-request-id, through request_headers).
	ID string
	// Settle is the key of the entry present only on the call that
	// settles (Envoy's stream-done call, through a generic_key).
	Settle string
	// Lease is how long an unsettled hold lasts: DefaultHoldLease unless
	// given, within (0, limits.MaxLease].
	Lease time.Duration
	// Line is where the holds field is in its file (0 over xDS, whose
	// message has no holds).
	Line int
}

// DefaultHoldLease is a hold's lease when the domain gives none: longer
// than an LLM's slowest answer, short enough that what a lost settle holds
// comes back within the hour.
const DefaultHoldLease = 10 * time.Minute

// Holds returns the holds that domain declares, nil when it declares none
// or c has no such domain.
func (c *Config) Holds(domain string) *Holds {
	if c == nil {
		return nil
	}
	if d := c.Domains[domain]; d != nil {
		return d.Holds
	}
	return nil
}

// Equal reports whether h and o declare the same holds (their lines
// aside); nil is no holds.
func (h *Holds) Equal(o *Holds) bool {
	if h == nil || o == nil {
		return h == o
	}
	return h.ID == o.ID && h.Settle == o.Settle && h.Lease == o.Lease
}

// rawHolds is a holds field before validation.
type rawHolds struct {
	// at is the holds field itself.
	at         pos
	id, settle field[string]
	lease      field[time.Duration]
}

// holds validates a domain's holds: an id and a settle, both keys, not
// the same one, and a lease within (0, limits.MaxLease].
func (v validator) holds(f field[*rawHolds]) (*Holds, error) {
	if !f.set {
		return nil, nil
	}
	r := f.v
	for _, k := range []field[string]{r.id, r.settle} {
		switch {
		case !k.set:
			return nil, r.at.nameErrorf("has no %s", k.at.name)
		case k.v == "":
			return nil, k.at.errorf("empty")
		}
	}
	if r.settle.v == r.id.v {
		return nil, r.settle.at.errorf("the same key as id (%s); the settle needs an entry of its own", r.id.at)
	}
	h := &Holds{ID: r.id.v, Settle: r.settle.v, Lease: DefaultHoldLease, Line: r.at.key}
	if l := r.lease; l.set {
		if l.v <= 0 || l.v > limits.MaxLease {
			return nil, l.at.errorf("must be within (0, %s], got %s", limits.MaxLease, l.v)
		}
		h.Lease = l.v
	}
	return h, nil
}

// holdKey returns the error for a descriptor whose key, at, is one of
// holds' keys, or nil.
func (v validator) holdKey(key field[string]) error {
	h := v.rawHolds
	if h == nil {
		return nil
	}
	for _, k := range []field[string]{h.id, h.settle} {
		if key.v == k.v {
			return key.at.errorf("%q is the holds %s key (%s): its entries are taken out of every descriptor before the match, so no descriptor can match on it",
				key.v, k.at.name, k.at)
		}
	}
	return nil
}

// sameHolds refuses d, a domain's file that Load or Join merges into
// first, when the two declare different holds: a merged domain is one
// domain, whose descriptors all take the same entries out.
func sameHolds(first, d *Domain) error {
	if first.Holds.Equal(d.Holds) {
		return nil
	}
	e := &Error{File: d.File, Word: "holds", Msg: "not those of the domain's first file, " + first.File + " (the files of a merged domain declare the same holds, or none)"}
	if d.Holds != nil {
		e.Line = d.Holds.Line
	}
	return e
}
