package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// UsageReader reads what is used and left of a descriptor's limits, as
// *rls.Service does.
type UsageReader interface {
	Usage(ctx context.Context, domain string, entries []descriptors.Entry) (rls.Usage, error)
}

// serveUsage answers the tenant's read of what is left,
//
//	GET /v1/usage?domain=llm&descriptor=api_key=t1[,k2=v2...]
//
// with rls.Usage as JSON: every limit that would decide the descriptor,
// its used, held, remaining and reset, read with a peek (nothing is
// consumed). The descriptor is written as /explain's. With tokens, the
// call must carry `Authorization: Bearer TOKEN` with one of them (401
// otherwise); a page in a browser is refused (403), as the admin
// endpoints refuse it. 400 for a bad query, 404 for a domain no limits
// file configures, 503 before any config has arrived or when the store
// cannot be read. A descriptor no limit decides is answered 200 with no
// limits.
func serveUsage(w http.ResponseWriter, r *http.Request, o Options) {
	if why := refuseBrowser(w, r, false); why != "" {
		if o.BrowserRefused != nil {
			o.BrowserRefused("usage", why)
		}
		return
	}
	if o.UsageTokens != nil {
		if _, ok := bearer(r, o.UsageTokens()); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="envoy-rls usage"`)
			httpError(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer TOKEN, a token of -tenant-token-file)")
			return
		}
	}
	q, err := parseEntriesQuery(r.URL.RawQuery, "descriptor", "/v1/usage?domain=D&descriptor=key=value,key2=value2")
	if err == nil && q.format == "text" {
		err = errors.New("format text: /v1/usage answers JSON only")
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	u, err := o.Usage.Usage(r.Context(), q.domain, q.entries)
	switch {
	case errors.Is(err, rls.ErrUnknownDomain):
		httpError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, rls.ErrStoreRead):
		httpError(w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		httpError(w, refusedStatus(err), err.Error())
	default:
		writeJSON(w, http.StatusOK, u)
	}
}
