package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Explainer explains a descriptor, as *rls.Service does.
type Explainer interface {
	Explain(ctx context.Context, domain string, entries []descriptors.Entry) (rls.Explanation, error)
}

// serveExplain answers
//
//	GET /explain?domain=edge&descriptor=remote_address=1.2.3.4,path=/login[&format=json|text]
//
// with what the service does with that descriptor: the walk of the config
// tree, the limits matched, their store keys and current state (a peek:
// nothing is consumed). The answer is plain text, or JSON with format=json
// or an Accept header that asks for application/json.
func serveExplain(w http.ResponseWriter, r *http.Request, e Explainer) {
	q, err := parseExplainQuery(r.URL.RawQuery)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	ex, err := e.Explain(r.Context(), q.domain, q.entries)
	if err != nil {
		httpError(w, refusedStatus(err), err.Error())
		return
	}
	asJSON := q.format == "json" || (q.format == "" && strings.Contains(r.Header.Get("Accept"), "application/json"))
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(ex) //nolint:errcheck // the client went away
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ex.WriteText(w) //nolint:errcheck // the client went away
}

type explainQuery struct {
	domain  string
	entries []descriptors.Entry
	format  string
}

// parseExplainQuery reads /explain's parameters from the raw query. The
// descriptor's `,` and `=` separate entries and their key and value before
// URL decoding, so a value may hold `%2C` and `%3D`; a descriptor encoded
// whole (no literal `=` in it, as curl --data-urlencode writes it) is
// decoded first and then split.
func parseExplainQuery(raw string) (explainQuery, error) {
	return parseEntriesQuery(raw, "descriptor", "/explain?domain=edge&descriptor=key=value,key2=value2")
}

// parseEntriesQuery reads a domain, the entries of the parameter named
// param, and a format, as parseExplainQuery does; usage is the form the
// errors show.
func parseEntriesQuery(raw, param, usage string) (explainQuery, error) {
	q, desc, err := splitEntriesQuery(raw, param)
	if err != nil {
		return q, err
	}
	switch {
	case q.domain == "":
		return q, errors.New("missing domain: " + usage)
	case desc == "":
		return q, fmt.Errorf("missing %s: %s", param, usage)
	case q.format != "" && q.format != "json" && q.format != "text":
		return q, fmt.Errorf("format %q: want json or text", q.format)
	}
	q.entries, err = parseEntriesParam(desc, param)
	return q, err
}

// splitEntriesQuery reads the parameters of the raw query, each once: the
// domain and the format decoded, and the parameter named param as it
// stands, for parseEntriesParam to split before it decodes.
func splitEntriesQuery(raw, param string) (q explainQuery, desc string, err error) {
	seen := map[string]bool{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		rawName, rawValue, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return q, "", fmt.Errorf("parameter %q: %v", rawName, err)
		}
		if seen[name] {
			return q, "", fmt.Errorf("parameter %s given twice: one descriptor per call", name)
		}
		seen[name] = true
		switch name {
		case param:
			desc = rawValue
			continue
		case "domain", "format":
		default:
			return q, "", fmt.Errorf("unknown parameter %q (want domain, %s and optionally format)", name, param)
		}
		v, err := url.QueryUnescape(rawValue)
		if err != nil {
			return q, "", fmt.Errorf("parameter %s: %v", name, err)
		}
		if name == "domain" {
			q.domain = v
		} else {
			q.format = v
		}
	}
	return q, desc, nil
}

// parseEntriesParam splits desc, the raw value of the parameter named
// param, into entries: at its `,` and `=` before decoding each part, or,
// encoded whole (no literal `=`), after decoding it.
func parseEntriesParam(desc, param string) ([]descriptors.Entry, error) {
	decodeParts := true
	if !strings.Contains(desc, "=") {
		// Encoded whole: decode, then split.
		d, err := url.QueryUnescape(desc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", param, err)
		}
		desc, decodeParts = d, false
	}
	var entries []descriptors.Entry
	for part := range strings.SplitSeq(desc, ",") {
		k, v, ok := strings.Cut(part, "=")
		if decodeParts {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				return nil, fmt.Errorf("%s: %v", param, err)
			}
			if v, err = url.QueryUnescape(v); err != nil {
				return nil, fmt.Errorf("%s: %v", param, err)
			}
		}
		if !ok || k == "" {
			return nil, fmt.Errorf("%s entry %q: want key=value", param, part)
		}
		entries = append(entries, descriptors.Entry{Key: k, Value: v})
	}
	return entries, nil
}

// refusedStatus is the HTTP status of a request Explain or Reset refuses:
// 503 before any config has arrived, as the decision's UNAVAILABLE; 400
// for a request out of bounds.
func refusedStatus(err error) int {
	if errors.Is(err, rls.ErrNotLoaded) {
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}
