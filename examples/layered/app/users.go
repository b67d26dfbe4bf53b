package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxUserLen bounds a user name: it becomes a descriptor value, which
// envoy-rls bounds too, and a name longer than this is a mistake in the
// users file rather than a user.
const maxUserLen = 64

// Users is the set of user names the example accepts. It is never
// changed once built, so handlers on many goroutines read it freely.
type Users map[string]struct{}

// DemoUsers are the users of the walk-through (docs/layers.md), accepted
// when no users file is given.
func DemoUsers() Users {
	return Users{"alice": {}, "bob": {}, "carol": {}}
}

// Has reports whether name is a known user.
func (u Users) Has(name string) bool {
	_, ok := u[name]
	return ok
}

// LoadUsers reads a users file (see ParseUsers).
func LoadUsers(path string) (Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	defer f.Close()
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

// ParseUsers reads one user name a line; blank lines and lines starting
// with # are skipped. A name is what a client sends after "Bearer " and
// what envoy-rls counts under, so it must be a single token of printable
// ASCII without spaces; a file with no name is an error, since it would
// lock every user out.
func ParseUsers(r io.Reader) (Users, error) {
	u := Users{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if err := checkUserName(name); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		u[name] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(u) == 0 {
		return nil, errors.New("no user names")
	}
	return u, nil
}

// checkUserName accepts what a Bearer token may carry of a name.
func checkUserName(name string) error {
	if len(name) > maxUserLen {
		return fmt.Errorf("user name of %d bytes, at most %d", len(name), maxUserLen)
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("user name %q: only printable ASCII without spaces", name)
		}
	}
	return nil
}
