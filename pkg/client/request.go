package client

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// request is one RateLimitRequest and the descriptor and entry messages it
// points to, kept for the next call: they grow to the largest request
// seen and are reused, never copied (protobuf messages must not be).
type request struct {
	msg         rlsv3.RateLimitRequest
	descriptors []*ratelimitv3.RateLimitDescriptor
	entries     []*ratelimitv3.RateLimitDescriptor_Entry
}

// fill makes r's message ask for domain and ds with hits.
func (r *request) fill(domain string, hits uint32, ds []Descriptor) {
	total := 0
	for _, d := range ds {
		total += len(d)
	}
	for len(r.descriptors) < len(ds) {
		r.descriptors = append(r.descriptors, new(ratelimitv3.RateLimitDescriptor))
	}
	for len(r.entries) < total {
		r.entries = append(r.entries, new(ratelimitv3.RateLimitDescriptor_Entry))
	}
	next := 0
	for i, d := range ds {
		entries := r.entries[next : next+len(d) : next+len(d)]
		for j, e := range d {
			entries[j].Key, entries[j].Value = e.Key, e.Value
		}
		r.descriptors[i].Entries = entries
		next += len(d)
	}
	r.msg.Domain = domain
	r.msg.HitsAddend = hits
	r.msg.Descriptors = r.descriptors[:len(ds)]
}

// clear drops the caller's strings, so that a pooled request keeps
// nothing of the call it served alive.
func (r *request) clear() {
	for _, d := range r.msg.Descriptors {
		for _, e := range d.Entries {
			e.Key, e.Value = "", ""
		}
		d.Entries = nil
	}
	r.msg.Domain = ""
	r.msg.Descriptors = nil
}
