package config

import "testing"

// Join keeps Load's rule for domains that come from other sources than
// files: each names its source, which has no lines.
func TestJoin(t *testing.T) {
	domain := func(source, name, key string) *Domain {
		return &Domain{Name: name, File: source, Descriptors: []*Descriptor{{Key: key}}}
	}
	if _, err := (Options{}).Join([]*Domain{domain("a", "api", "ip"), domain("b", "api", "path")}); err == nil ||
		err.Error() != "b: api: duplicate domain, first in a" {
		t.Errorf("a domain twice: got %v, want it named with both sources", err)
	}
	c, err := Options{MergeDomains: true}.Join([]*Domain{domain("a", "api", "ip"), domain("b", "web", "ip"), domain("c", "api", "path")})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Domains["api"]; len(c.Domains) != 2 || d.File != "a" || len(d.Descriptors) != 2 || d.Descriptors[1].Key != "path" {
		t.Errorf("merged: got %v, want api from a then c, and web", c.Domains)
	}
	_, err = Options{MergeDomains: true}.Join([]*Domain{domain("a", "api", "ip"), domain("c", "api", "ip")})
	if want := "c: api.ip: duplicate descriptor of a merged domain, first in a"; err == nil || err.Error() != want {
		t.Errorf("a top-level descriptor twice: got %v, want %s", err, want)
	}
}
