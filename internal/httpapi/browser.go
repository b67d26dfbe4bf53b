package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// A page a browser opens can send requests to any address the browser
// reaches, the service's loopback or private ones among them. A POST
// whose body is text/plain, a form or no type at all is a "simple"
// request: the browser sends it without asking the server first
// (no CORS preflight), and only hides the answer from the page, after
// the request has done its work. A page whose name an attacker rebinds
// to the service's address (DNS rebinding) is not even cross-origin. So
// the endpoints that change state refuse what only a browser sends, and
// a tool (curl, envoy-rls's CLI, Envoy), which sends none of it, is
// unaffected.

// Why a request is refused as a browser's, as Options.BrowserRefused and
// AdminOptions.BrowserRefused get it.
const (
	// RefusedCrossSite is a request whose Sec-Fetch-Site says another
	// site (cross-site, or same-site: a sibling subdomain) made it.
	RefusedCrossSite = "cross_site"
	// RefusedForeignOrigin is a browser's request (one with an Origin or
	// a Sec-Fetch-Site) whose Origin is not the address it was sent to,
	// or whose Host is a name rather than an address or localhost: the
	// name a rebinding page has.
	RefusedForeignOrigin = "foreign_origin"
	// RefusedContentType is a body of a type other than
	// application/json, which a browser cannot send across origins
	// without a preflight the service never answers.
	RefusedContentType = "content_type"
)

// browserRefusal returns why r is refused as a request a page in a
// browser made, "" when it is not; wantJSON refuses a body whose
// Content-Type is not application/json as well.
func browserRefusal(r *http.Request, wantJSON bool) string {
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "cross-site" || site == "same-site" {
		return RefusedCrossSite
	}
	origin := r.Header.Get("Origin")
	if site != "" || origin != "" {
		if !addressHost(r.Host) {
			return RefusedForeignOrigin
		}
		if u, err := url.Parse(origin); origin != "" && (err != nil || !strings.EqualFold(u.Host, r.Host)) {
			return RefusedForeignOrigin
		}
	}
	if wantJSON {
		if t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || t != "application/json" {
			return RefusedContentType
		}
	}
	return ""
}

// addressHost reports whether the Host header hostport names an IP
// address or localhost, rather than a name anyone could point at the
// service.
func addressHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}

// refuseBrowser answers r itself, and returns why, when browserRefusal
// refuses it: 415 for a body that is not JSON, 403 otherwise.
func refuseBrowser(w http.ResponseWriter, r *http.Request, wantJSON bool) string {
	why := browserRefusal(r, wantJSON)
	switch why {
	case "":
	case RefusedContentType:
		httpError(w, http.StatusUnsupportedMediaType, "the body must be application/json (Content-Type: application/json)")
	default:
		httpError(w, http.StatusForbidden, "refused: a browser's request from another site, or to a name rather than the service's address ("+why+"); use curl or envoy-rls's CLI")
	}
	return why
}
