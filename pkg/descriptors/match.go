package descriptors

import (
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key, Value string
}

// Index is the matcher built from one config snapshot. It is immutable and
// safe to share between goroutines; a reload builds a new one.
type Index struct {
	config  *config.Config
	domains map[string]*Node
	// missing is set on the index of no config at all (NewIndex(nil)).
	missing bool
}

// Loaded reports whether the index holds a config, even one without
// domains; false before any has arrived.
func (ix *Index) Loaded() bool { return !ix.missing }

// Node is one descriptor of the config tree, prepared for matching.
type Node struct {
	// Descriptor is the config node; nil for a domain's root.
	Descriptor *config.Descriptor
	// Path is the node's place in its domain, `key_value.key2` as
	// envoyproxy/ratelimit names it; a bounded label for metrics.
	Path string
	// Wildcard is set when the node's value holds a `*`.
	Wildcard bool

	// kids are the children in config order; exact, wildcards and bare
	// find the one that takes a known entry.
	kids      []*Node
	exact     map[pair]*Node
	wildcards wildcards
	bare      map[string]*Node
}

type pair struct{ key, value string }

// NewIndex prepares c for matching. A nil c is no config at all (none has
// arrived yet from xDS): the index is empty and Loaded reports false.
func NewIndex(c *config.Config) *Index {
	if c == nil {
		return &Index{config: &config.Config{Domains: map[string]*config.Domain{}}, missing: true}
	}
	ix := &Index{config: c, domains: make(map[string]*Node, len(c.Domains))}
	for name, d := range c.Domains {
		root := &Node{}
		root.add(d.Descriptors, "")
		ix.domains[name] = root
	}
	return ix
}

// Known reports whether domain is configured.
func (ix *Index) Known(domain string) bool {
	_, ok := ix.domains[domain]
	return ok
}

// Config returns the snapshot the index was built from.
func (ix *Index) Config() *config.Config { return ix.config }

// childPath is the Path of descriptor d under the node whose Path is parent
// ("" at the top of a domain): `key_value.key2`.
func childPath(parent string, d *config.Descriptor) string {
	path := d.Key
	if d.Value != "" {
		path += "_" + d.Value
	}
	if parent != "" {
		path = parent + "." + path
	}
	return path
}

func (n *Node) add(children []*config.Descriptor, parent string) {
	var wildcards []*Node
	for _, d := range children {
		path := childPath(parent, d)
		c := &Node{Descriptor: d, Path: path, Wildcard: strings.Contains(d.Value, "*")}
		n.kids = append(n.kids, c)
		switch {
		case d.Value == "":
			if n.bare == nil {
				n.bare = make(map[string]*Node)
			}
			n.bare[d.Key] = c
		case c.Wildcard:
			wildcards = append(wildcards, c)
		default:
			if n.exact == nil {
				n.exact = make(map[pair]*Node)
			}
			n.exact[pair{d.Key, d.Value}] = c
		}
		c.add(d.Descriptors, path)
	}
	n.wildcards = newWildcards(wildcards)
}

// Match walks domain's tree with entries, in order (walk.go has the rule).
// It returns the node where the walk ended on the last entry, or nil when
// the walk stopped early; known reports whether the domain is configured
// at all. path receives the node matched at each level (reuse its storage
// across calls to avoid allocating); on a match, len(path) == len(entries).
func (ix *Index) Match(domain string, entries []Entry, path []*Node) (end *Node, known bool, _ []*Node) {
	root, ok := ix.domains[domain]
	if !ok {
		return nil, false, path
	}
	if len(entries) == 0 {
		return nil, true, path
	}
	base := len(path)
	path = follow(root, entries, path)
	if len(path)-base == len(entries) {
		end = path[len(path)-1]
	}
	return end, true, path
}

// WildcardMatch reports whether value matches pattern, where each `*` in
// pattern stands for any run of bytes, possibly empty.
func WildcardMatch(pattern, value string) bool {
	// Iterative matching with backtracking to the last star: linear in
	// practice and never exponential, whatever the input.
	p, v := 0, 0
	star, mark := -1, 0
	for v < len(value) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, v
			p++
		case p < len(pattern) && pattern[p] == value[v]:
			p++
			v++
		case star >= 0:
			p = star + 1
			mark++
			v = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
