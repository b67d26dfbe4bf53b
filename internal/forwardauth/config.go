package forwardauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.yaml.in/yaml/v3"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Error is every error Parse and Load return: a problem at a place in a
// forward-auth file, formatted FILE:LINE: WORD: MSG. It is the limits
// file's error type, so that both files report problems alike.
type Error = config.Error

// Config is a parsed forward-auth file: whom to trust for the client's
// address, and the policies by name.
type Config struct {
	trusted  []netip.Prefix
	policies map[string]*Policy
	// inOrder holds the policies in file order, for Policies.
	inOrder []*Policy
}

// Policy is one endpoint, /v1/forward-auth/{Name}: the domain it asks
// about and the descriptors it builds.
type Policy struct {
	Name   string
	Domain string
	// RefusedStatus is the HTTP status of a refusal: 429, or 403 for
	// nginx, whose auth_request takes no other refusal.
	RefusedStatus int
	descriptors   []descriptorRule
	// rateLimits are the entries as parsed, before compiling: what
	// `envoy-rls lint -forward-auth` checks against the limits.
	rateLimits []*routev3.RateLimit
}

// RateLimits returns the policy's rate_limits entries as Envoy's
// RateLimit, in file order, for lint to derive the descriptors they build
// as it does an Envoy route's. The caller must not change them.
func (p *Policy) RateLimits() []*routev3.RateLimit { return p.rateLimits }

// Policy returns the policy called name, nil when there is none.
func (c *Config) Policy(name string) *Policy { return c.policies[name] }

// Policies returns the policies in file order; none for a nil Config.
func (c *Config) Policies() []*Policy {
	if c == nil {
		return nil
	}
	return c.inOrder
}

// Len is the number of policies.
func (c *Config) Len() int { return len(c.policies) }

// file is the shape of the YAML, decoded strictly: an unknown field is an
// error with its line.
type file struct {
	TrustedProxies []yaml.Node `yaml:"trusted_proxies"`
	Policies       []policy    `yaml:"policies"`
}

type policy struct {
	Name          yaml.Node   `yaml:"name"`
	Domain        yaml.Node   `yaml:"domain"`
	RefusedStatus yaml.Node   `yaml:"refused_status"`
	RateLimits    []yaml.Node `yaml:"rate_limits"`
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, b)
}

// Parse parses data, the contents of the file called name (for errors).
// It refuses a file without policies, unknown fields, a policy without a
// name or domain, two policies of one name, and every rate limit action
// that only Envoy can evaluate (actions.go).
func Parse(name string, data []byte) (*Config, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Msg: "empty file: policies are required"}
		}
		return nil, yamlError(name, err)
	}
	c := &Config{policies: map[string]*Policy{}}
	for _, n := range f.TrustedProxies {
		p, err := parsePrefix(n.Value)
		if err != nil || n.Kind != yaml.ScalarNode {
			return nil, &Error{File: name, Line: n.Line, Word: "trusted_proxies", Msg: fmt.Sprintf("%q is not an address or a CIDR prefix", n.Value)}
		}
		c.trusted = append(c.trusted, p)
	}
	if len(f.Policies) == 0 {
		return nil, &Error{File: name, Word: "policies", Msg: "at least one policy is required"}
	}
	for i := range f.Policies {
		p, err := f.Policies[i].build(name)
		if err != nil {
			return nil, err
		}
		if c.policies[p.Name] != nil {
			return nil, &Error{File: name, Line: f.Policies[i].Name.Line, Word: "name", Msg: fmt.Sprintf("policy %q is defined twice", p.Name)}
		}
		c.policies[p.Name] = p
		c.inOrder = append(c.inOrder, p)
	}
	return c, nil
}

// yamlError places an error of the YAML decoder: its messages start with
// "yaml: " and name lines themselves ("line 3: field x not found").
func yamlError(name string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil {
				line, msg = l, tail
			}
		}
	}
	return &Error{File: name, Line: line, Msg: msg}
}

// parsePrefix reads a CIDR prefix, or an address as a prefix of its own.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// policyName bounds a policy's name to what a URL path segment holds as
// it is: letters, digits, '-', '_' and '.'.
func policyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		ok := r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return false
		}
	}
	return true
}

// build checks one policy of file name.
func (p *policy) build(name string) (*Policy, error) {
	line := p.Name.Line
	if p.Name.Kind != yaml.ScalarNode || !policyName(p.Name.Value) {
		return nil, &Error{File: name, Line: line, Word: "name", Msg: fmt.Sprintf("a policy needs a name of letters, digits, '-', '_' or '.' (at most 64), got %q", p.Name.Value)}
	}
	out := &Policy{Name: p.Name.Value, Domain: p.Domain.Value, RefusedStatus: 429}
	if p.Domain.Kind != yaml.ScalarNode || out.Domain == "" {
		return nil, &Error{File: name, Line: line, Word: "domain", Msg: fmt.Sprintf("policy %q needs the domain of the limits it asks about", out.Name)}
	}
	if p.RefusedStatus.Kind != 0 {
		s, err := strconv.Atoi(p.RefusedStatus.Value)
		if err != nil || (s != 429 && s != 403) {
			return nil, &Error{File: name, Line: p.RefusedStatus.Line, Word: "refused_status", Msg: fmt.Sprintf("%q: want 429, or 403 for nginx's auth_request", p.RefusedStatus.Value)}
		}
		out.RefusedStatus = s
	}
	if len(p.RateLimits) == 0 {
		return nil, &Error{File: name, Line: line, Word: "rate_limits", Msg: fmt.Sprintf("policy %q builds no descriptor: rate_limits is required", out.Name)}
	}
	if len(p.RateLimits) > rls.MaxDescriptors {
		return nil, &Error{File: name, Line: p.RateLimits[rls.MaxDescriptors].Line, Word: "rate_limits", Msg: fmt.Sprintf("policy %q has %d entries, above the service's %d descriptors a request", out.Name, len(p.RateLimits), rls.MaxDescriptors)}
	}
	for i := range p.RateLimits {
		d, rl, err := compileRateLimit(&p.RateLimits[i])
		if err != nil {
			err.File = name
			return nil, err
		}
		out.descriptors = append(out.descriptors, d)
		out.rateLimits = append(out.rateLimits, rl)
	}
	return out, nil
}
