package descriptors

// Stat keys name the stats envoyproxy/ratelimit keeps for each limit, the
// `domain.key_value.key2` part of `ratelimit.service.rate_limit.KEY.total_hits`
// that a statsd mapper turns into the labels domain, key1 and key2. They are
// built from the config nodes a walk matched, so that their number is
// bounded by the config, except where the config asks for the request's
// values: detailed_metric on the last node, value_to_metric on a level that
// matches more than one value.

// StatKeyVaries reports whether the stat key of a descriptor whose walk
// matched path (one node per level, as Index.Match fills it) depends on the
// request's values as well as on the nodes. When it does not, the key is
// the same for every descriptor that ends on the same node, and can be
// worked out once per node.
func StatKeyVaries(entries []Entry, path []*Node) bool {
	if len(path) == len(entries) && len(path) > 0 && path[len(path)-1].Descriptor.DetailedMetric {
		return true
	}
	for _, n := range path {
		d := n.Descriptor
		if d.ValueToMetric && (d.Value == "" || n.Wildcard && !d.ShareThreshold) {
			return true
		}
	}
	return false
}

// AppendStatKey appends to b the stat key of a descriptor of domain with
// entries, whose walk matched path, as envoyproxy/ratelimit builds it:
// the domain, then one part per entry, joined by dots. A part is the key,
// then `_` and a value where the node has one: the node's value for a key
// and value, the pattern for a wildcard, nothing for a key alone. A level
// with value_to_metric takes the request's value where its node would
// otherwise give a pattern or nothing (a share_threshold wildcard keeps its
// pattern, since its values count together). When the last node asks for
// detailed_metric, every part is the request's key_value (a share_threshold
// wildcard's, again, its pattern). An entry past the end of path (a walk
// that stopped early, for Envoy's limit override) is its key alone.
//
// The key is not sanitized; SanitizeStatKey makes it fit to name a stat.
func AppendStatKey(b []byte, domain string, entries []Entry, path []*Node) []byte {
	b = append(b, domain...)
	if len(path) == len(entries) && len(path) > 0 && path[len(path)-1].Descriptor.DetailedMetric {
		return appendDetailed(b, entries, path)
	}
	for i, e := range entries {
		b = append(b, '.')
		b = append(b, e.Key...)
		if i >= len(path) {
			continue
		}
		n, d := path[i], path[i].Descriptor
		var v string
		switch {
		case n.Wildcard && (d.ShareThreshold || !d.ValueToMetric):
			v = d.Value
		case n.Wildcard, d.Value == "" && d.ValueToMetric:
			v = e.Value
		case d.Value != "":
			v = d.Value
		}
		if v != "" {
			b = append(b, '_')
			b = append(b, v...)
		}
	}
	return b
}

// appendDetailed appends the parts of a detailed_metric stat key. Without a
// share_threshold wildcard on the path, every part is key_value, with the
// `_` even when the value is empty; with one, the wildcard's part has its
// pattern and the others drop the `_` of an empty value. Both are
// envoyproxy/ratelimit's forms, kept so that a dashboard's label values
// match.
func appendDetailed(b []byte, entries []Entry, path []*Node) []byte {
	shared := false
	for _, n := range path {
		shared = shared || n.Wildcard && n.Descriptor.ShareThreshold
	}
	for i, e := range entries {
		b = append(b, '.')
		b = append(b, e.Key...)
		n := path[i]
		switch {
		case !shared:
			b = append(b, '_')
			b = append(b, e.Value...)
		case n.Wildcard && n.Descriptor.ShareThreshold:
			b = append(b, '_')
			b = append(b, n.Descriptor.Value...)
		case e.Value != "":
			b = append(b, '_')
			b = append(b, e.Value...)
		}
	}
	return b
}

// SanitizeStatKey rewrites key in place before it names a stat: every
// byte outside statKeySafe becomes `_`, and so do the dots inside anything
// that looks like an IPv4 address (four runs of one to three digits joined
// by dots), so that an address stays one part of the key. It returns key.
//
// envoyproxy/ratelimit replaces only `:` and `|`, and the rest of a
// request's value goes out as it came (detailed_metric, value_to_metric):
// a newline there starts a statsd line of the caller's own, a comma a
// DogStatsD tag of its own, and a byte that is not UTF-8 makes a label
// Prometheus cannot serve. The values of ordinary requests (names, paths,
// addresses, ids) hold none of those bytes, so their stat names are
// envoyproxy/ratelimit's.
func SanitizeStatKey(key []byte) []byte {
	for i, c := range key {
		if !statKeySafe[c] {
			key[i] = '_'
		}
	}
	for i := 0; i < len(key); {
		end, ok := ipv4At(key, i)
		if !ok {
			i++
			continue
		}
		for j := i; j < end; j++ {
			if key[j] == '.' {
				key[j] = '_'
			}
		}
		i = end
	}
	return key
}

// statKeySafe holds the bytes a stat key keeps: the printable ASCII
// characters but for the space and the ones statsd's and DogStatsD's
// lines reserve (`:` ends the name, `|` a field, `,` a tag, `#` starts
// the tags). Control bytes, DEL and every byte of a multi-byte or
// invalid UTF-8 sequence are out.
var statKeySafe = func() (t [256]bool) {
	for c := '!'; c <= '~'; c++ {
		t[c] = true
	}
	for _, c := range ":|,#" {
		t[c] = false
	}
	return t
}()

// StatByteSafe reports whether c goes into a stat name or tag as it is;
// SanitizeStatKey replaces any other byte.
func StatByteSafe(c byte) bool { return statKeySafe[c] }

// ipv4At reports whether an IPv4-like run starts at key[i], the way a
// leftmost regular expression match of \d{1,3}(\.\d{1,3}){3} would find it,
// and where it ends. The first three runs of digits must be whole (a
// longer run cannot be followed by its dot), the last takes up to three.
func ipv4At(key []byte, i int) (end int, ok bool) {
	for part := 0; part < 4; part++ {
		n := 0
		for i+n < len(key) && n < 4 && isDigit(key[i+n]) {
			n++
		}
		switch {
		case n == 0:
			return 0, false
		case part == 3:
			return i + min(n, 3), true
		case n > 3 || i+n >= len(key) || key[i+n] != '.':
			return 0, false
		}
		i += n + 1
	}
	return 0, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
