package forwardauth

import (
	"errors"
	"fmt"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// headerMatcher is one of Envoy's HeaderMatchers, compiled.
type headerMatcher struct {
	name  string // lower case, or a pseudo-header
	canon string // name's canonical form, the key of http.Header
	// present: the matcher is present_match (want presence == presentWant);
	// otherwise match tests the value.
	present, presentWant bool
	match                func(string) bool
	invert               bool
	missingAsEmpty       bool
}

// compileHeaderMatcher compiles m; each of Envoy's ways to match a value
// is kept, and a matcher without one is refused.
func compileHeaderMatcher(m *routev3.HeaderMatcher) (headerMatcher, error) {
	name := strings.ToLower(m.GetName())
	hm := headerMatcher{name: name, canon: textproto.CanonicalMIMEHeaderKey(name), invert: m.GetInvertMatch(), missingAsEmpty: m.GetTreatMissingHeaderAsEmpty()}
	var err error
	switch x := m.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present, hm.presentWant = true, x.PresentMatch
	case *routev3.HeaderMatcher_ExactMatch:
		//lint:ignore SA1019 deprecated in favour of string_match, still accepted by Envoy
		hm.match = func(v string) bool { return v == x.ExactMatch }
	case *routev3.HeaderMatcher_PrefixMatch:
		//lint:ignore SA1019 as above
		hm.match = func(v string) bool { return strings.HasPrefix(v, x.PrefixMatch) }
	case *routev3.HeaderMatcher_SuffixMatch:
		//lint:ignore SA1019 as above
		hm.match = func(v string) bool { return strings.HasSuffix(v, x.SuffixMatch) }
	case *routev3.HeaderMatcher_ContainsMatch:
		//lint:ignore SA1019 as above
		hm.match = func(v string) bool { return strings.Contains(v, x.ContainsMatch) }
	case *routev3.HeaderMatcher_SafeRegexMatch:
		var re *regexp.Regexp
		//lint:ignore SA1019 as above
		if re, err = regexpOf(x.SafeRegexMatch.GetRegex()); err == nil {
			hm.match = re.MatchString
		}
	case *routev3.HeaderMatcher_RangeMatch:
		lo, hi := x.RangeMatch.GetStart(), x.RangeMatch.GetEnd()
		hm.match = func(v string) bool {
			n, err := strconv.ParseInt(v, 10, 64)
			return err == nil && n >= lo && n < hi
		}
	case *routev3.HeaderMatcher_StringMatch:
		hm.match, err = stringMatcher(x.StringMatch)
	case nil:
		// Envoy: a matcher without a specifier matches a present header.
		hm.present, hm.presentWant = true, true
	default:
		// A specifier of a newer Envoy API than this build knows.
		err = fmt.Errorf("matcher %T is not supported", x)
	}
	if err != nil {
		return headerMatcher{}, fmt.Errorf("header %q: %w", m.GetName(), err)
	}
	return hm, nil
}

// stringMatcher compiles Envoy's StringMatcher.
func stringMatcher(s *matcherv3.StringMatcher) (func(string) bool, error) {
	fold := s.GetIgnoreCase()
	eq := func(a, b string) bool { return a == b || fold && strings.EqualFold(a, b) }
	norm := func(v string) string {
		if fold {
			return strings.ToLower(v)
		}
		return v
	}
	switch x := s.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return func(v string) bool { return eq(v, x.Exact) }, nil
	case *matcherv3.StringMatcher_Prefix:
		p := norm(x.Prefix)
		return func(v string) bool { return strings.HasPrefix(norm(v), p) }, nil
	case *matcherv3.StringMatcher_Suffix:
		p := norm(x.Suffix)
		return func(v string) bool { return strings.HasSuffix(norm(v), p) }, nil
	case *matcherv3.StringMatcher_Contains:
		p := norm(x.Contains)
		return func(v string) bool { return strings.Contains(norm(v), p) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexpOf(x.SafeRegex.GetRegex())
		if err != nil {
			return nil, err
		}
		return re.MatchString, nil
	}
	return nil, errors.New("string_match: only exact, prefix, suffix, contains and safe_regex are supported")
}

// matches reports whether the matcher matches, given the header's value
// and whether it was present, as Envoy decides: an absent header matches
// nothing but present_match: false (or an inverted matcher), unless
// treat_missing_header_as_empty makes it an empty value.
func (m *headerMatcher) matches(v string, ok bool) bool {
	if !ok && m.missingAsEmpty {
		v, ok = "", true
	}
	var hit bool
	if m.present {
		hit = ok == m.presentWant
	} else {
		hit = ok && m.match(v)
	}
	return hit != m.invert
}
