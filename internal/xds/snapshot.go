package xds

import (
	"fmt"
	"slices"
	"strings"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// TypeURL is the type of the resources the client asks for: the
// RateLimitConfig of go-control-plane's ratelimit module, which Envoy
// Gateway serves to envoyproxy/ratelimit.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// NewConfig turns the RateLimitConfig resources of one snapshot into one
// Config, each checked by o.FromProto as a limits file is checked by
// o.Load: one domain per resource, errors naming the resource and the
// field's path. A domain in two resources is an error naming both, or
// with o.MergeDomains (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG, which
// it applies to xDS too) one domain (config.Options.Join). No resources
// is an empty Config: the server has no limits for this node.
//
// Resources are read in the order of their names, so that the same
// snapshot gives the same config and the same errors whatever order the
// server sent it in.
func NewConfig(o config.Options, resources []*rlsconfv3.RateLimitConfig) (*config.Config, error) {
	named := make([]namedResource, len(resources))
	for i, m := range resources {
		named[i] = namedResource{name: resourceName(m, i), msg: m}
	}
	slices.SortStableFunc(named, func(a, b namedResource) int { return strings.Compare(a.name, b.name) })
	domains := make([]*config.Domain, len(named))
	for i, r := range named {
		if err := knownFields(r.name, "", r.msg.ProtoReflect()); err != nil {
			return nil, err
		}
		d, err := o.FromProto(r.name, r.msg)
		if err != nil {
			return nil, err
		}
		domains[i] = d
	}
	return o.Join(domains)
}

type namedResource struct {
	name string
	msg  *rlsconfv3.RateLimitConfig
}

// resourceName is the name a resource goes by in errors and in
// Domain.File: its own name (Envoy Gateway names each after its domain),
// or its place in the snapshot when it has none.
func resourceName(m *rlsconfv3.RateLimitConfig, i int) string {
	if n := m.GetName(); n != "" {
		return n
	}
	return fmt.Sprintf("resources[%d]", i)
}

// unpack reads the resources of one DiscoveryResponse, each of which must
// be a RateLimitConfig.
func unpack(resources []*anypb.Any) ([]*rlsconfv3.RateLimitConfig, error) {
	msgs := make([]*rlsconfv3.RateLimitConfig, len(resources))
	for i, a := range resources {
		if a.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("resources[%d]: type %s, want %s", i, a.GetTypeUrl(), TypeURL)
		}
		m := &rlsconfv3.RateLimitConfig{}
		if err := a.UnmarshalTo(m); err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		msgs[i] = m
	}
	return msgs, nil
}

// knownFields refuses a message that carries fields this build's
// RateLimitConfig does not have: a server built on a newer ratelimit
// module may set one (value_to_metric, say), and dropping it would change what
// the limit decides. A field left at its zero value is not on the wire,
// so only a field that is set is refused. path is where m is inside the
// resource, empty for the resource itself.
func knownFields(resource, path string, m protoreflect.Message) error {
	if len(m.GetUnknown()) > 0 {
		return &config.Error{File: resource, Word: path,
			Msg: "has fields this build of envoy-rls does not know (a newer RateLimitConfig): upgrade envoy-rls"}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		at := string(fd.Name())
		if path != "" {
			at = path + "." + at
		}
		if !fd.IsList() {
			err = knownFields(resource, at, v.Message())
			return err == nil
		}
		l := v.List()
		for i := 0; i < l.Len() && err == nil; i++ {
			err = knownFields(resource, fmt.Sprintf("%s[%d]", at, i), l.Get(i).Message())
		}
		return err == nil
	})
	return err
}

// sameResources reports whether two snapshots hold the same resources, in
// any order: a server that sends again what is in force (after a
// reconnection, say) changes nothing, and the client need not swap it in.
func sameResources(a, b []*rlsconfv3.RateLimitConfig) bool {
	if len(a) != len(b) {
		return false
	}
	byName := func(ms []*rlsconfv3.RateLimitConfig) []*rlsconfv3.RateLimitConfig {
		s := slices.Clone(ms)
		slices.SortStableFunc(s, func(x, y *rlsconfv3.RateLimitConfig) int { return strings.Compare(x.GetName(), y.GetName()) })
		return s
	}
	sa, sb := byName(a), byName(b)
	for i := range sa {
		if !proto.Equal(sa[i], sb[i]) {
			return false
		}
	}
	return true
}

// sameAnys reports whether two lists of resources hold the same messages
// in any order, by their bytes: what a server sends again is marshalled
// again, from the same messages.
func sameAnys(a, b []*anypb.Any) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(x *anypb.Any) string { return x.GetTypeUrl() + "\x00" + string(x.GetValue()) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}
