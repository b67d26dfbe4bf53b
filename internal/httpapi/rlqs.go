package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
)

// BucketExplainer explains an RLQS bucket id, as *rlqs.Service does.
type BucketExplainer interface {
	Explain(ctx context.Context, domain string, entries []descriptors.Entry) (rlqs.Bucket, error)
}

// rlqsUsage is the form of a GET /rlqs.
const rlqsUsage = "/rlqs?domain=edge&bucket=key=value,key2=value2"

// serveRLQS answers
//
//	GET /rlqs?domain=edge&bucket=plan=free,api_key=k[&format=json|text]
//
// with what the server's RLQS service does with that bucket id now: the
// match, the limit, and every live client of the bucket (this instance's
// streams and, with Redis, every instance's) with its demand, share and
// token bucket. The id is one parameter, in /explain's form, rather than
// a parameter per key: a bucket's keys are anyone's, `domain` or `format`
// included, and the form lets a value hold `,` and `=` (as %2C, %3D). A
// key given twice is refused: an id is a map. The answer is plain text,
// or JSON (rlqs.Bucket) with format=json or an Accept header that asks
// for it; 404 when the server does not serve RLQS, 503 when the demand
// store cannot be read.
func serveRLQS(w http.ResponseWriter, r *http.Request, o AdminOptions) {
	if o.Quotas == nil {
		o.Counted("rlqs", AdminNotFound)
		httpError(w, http.StatusNotFound, "this server does not serve RLQS (-rlqs=false)")
		return
	}
	q, err := parseEntriesQuery(r.URL.RawQuery, "bucket", rlqsUsage)
	if err == nil {
		err = distinctKeys(q.entries)
	}
	if err != nil {
		o.Counted("rlqs", AdminBadRequest)
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, err := o.Quotas.Explain(r.Context(), q.domain, q.entries)
	if err != nil {
		o.Counted("rlqs", AdminError)
		httpError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	o.Counted("rlqs", AdminOK)
	if q.format == "json" || (q.format == "" && strings.Contains(r.Header.Get("Accept"), "application/json")) {
		writeJSON(w, http.StatusOK, b)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	b.WriteText(w) //nolint:errcheck // the client went away
}

// distinctKeys refuses a bucket id that names a key twice.
func distinctKeys(entries []descriptors.Entry) error {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if seen[e.Key] {
			return fmt.Errorf("bucket key %q given twice: a bucket id is a map, one value a key", e.Key)
		}
		seen[e.Key] = true
	}
	return nil
}
