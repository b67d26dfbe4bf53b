package rls

import (
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata is the answer's dynamic_metadata with -dynamic-metadata,
// as envoyproxy/ratelimit writes it, so that Envoy's filters and access
// logs that read it keep working:
//
//	domain:      the request's domain
//	descriptors: one {entries: ["k=v", ...]} per request descriptor, with
//	             limit (Envoy's override, as text) and hitsAddend where the
//	             descriptor set them
//	hitsAddend:  the request's hits_addend, when not 0
//	metadata:    the `metadata` of the rules of the descriptors that passed
//	             (not OVER_LIMIT), merged in request order: mappings merge
//	             key by key, and where two other values meet the first wins
func dynamicMetadata(p *plan, req *rlsv3.RateLimitRequest) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		descs = append(descs, structpb.NewStructValue(descriptorMetadata(d)))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range p.descs {
		d := &p.descs[i]
		if d.verdict.over || d.unlimited || d.node == nil || len(d.rules) == 0 {
			continue
		}
		mergeMetadata(passed, d.node.Descriptor.Metadata)
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

func descriptorMetadata(d *ratelimitv3.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		var b strings.Builder
		b.Grow(len(e.GetKey()) + 1 + len(e.GetValue()))
		b.WriteString(e.GetKey())
		b.WriteByte('=')
		b.WriteString(e.GetValue())
		entries = append(entries, structpb.NewStringValue(b.String()))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if l := d.GetLimit(); l != nil {
		fields["limit"] = structpb.NewStringValue(l.String())
	}
	if h := d.GetHitsAddend(); h != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: fields}
}

// mergeMetadata merges src into dst: a key dst lacks is added (a copy: the
// config's metadata is shared by every request and must never change); a
// key both hold as mappings is merged in turn; any other collision keeps
// dst's value.
func mergeMetadata(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = proto.Clone(v).(*structpb.Value)
			continue
		}
		if hs, vs := have.GetStructValue(), v.GetStructValue(); hs != nil && vs != nil {
			mergeMetadata(hs, vs)
		}
	}
}
