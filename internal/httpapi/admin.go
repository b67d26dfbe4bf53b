package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/topk"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Resetter clears the state of the limits a descriptor matches, as
// *rls.Service does.
type Resetter interface {
	Reset(ctx context.Context, domain string, entries []descriptors.Entry) (rls.ResetDone, error)
}

// AdminOptions wire the admin endpoints, GET /top, POST /reset and GET
// /rlqs.
type AdminOptions struct {
	// Board is what GET /top reports.
	Board *topk.Board
	// Resetter serves POST /reset.
	Resetter Resetter
	// Tokens returns the bearer tokens a call must present, the last good
	// ones read; nil Tokens asks for none (the endpoints' own listener,
	// without -admin-token-file).
	Tokens func() *Tokens
	// HashValues shows values in the log of a reset as their hash, as
	// the store holds them.
	HashValues bool
	Log        *zap.Logger
	// Counted, when not nil, counts each call by endpoint (top, reset)
	// and result (ok, unauthorized, not_found, bad_request, error).
	Counted func(endpoint, result string)
	// Bodies bounds the bytes reset bodies hold at once, as /json's; nil
	// is a budget of its own.
	Bodies *BodyBudget
	// Quotas serves GET /rlqs (rlqs.go); nil when the server does not
	// serve RLQS.
	Quotas BucketExplainer
	// BrowserRefused, when not nil, is called for each call refused as a
	// browser's (browser.go), with the endpoint and why (Refused*).
	BrowserRefused func(endpoint, reason string)
}

// Results of an admin call, as AdminOptions.Counted gets them.
const (
	AdminOK           = "ok"
	AdminUnauthorized = "unauthorized"
	AdminNotFound     = "not_found"
	AdminBadRequest   = "bad_request"
	AdminError        = "error"
)

// DefaultTop and MaxTop bound the descriptors per rule GET /top lists
// (?n=).
const (
	DefaultTop = 10
	MaxTop     = 1000
)

// AdminHandler returns the admin endpoints:
//
//	GET  /top[?n=10]  per rule, the descriptors refused most over the last minute (topk.Report as JSON)
//	POST /reset       body: a RateLimitRequest in protobuf JSON, one descriptor: its limits' state cleared
//	GET  /rlqs?domain=D&bucket=k=v,...  an RLQS bucket: its limit, clients, demands and shares (rlqs.go)
//
// Each call must carry `Authorization: Bearer TOKEN` with a token of
// o.Tokens when there are tokens: without one, or with a wrong one, the
// answer is 401 and nothing is done. A call a page in a browser made is
// refused, 403, and a reset whose body is not application/json, 415
// (browser.go): without tokens, nothing else stops a page the operator
// opens from lifting a lock (block_for).
func AdminHandler(o AdminOptions) http.Handler {
	if o.Bodies == nil {
		o.Bodies = NewBodyBudget(DefaultBodyBudget)
	}
	if o.Counted == nil {
		o.Counted = func(string, string) {}
	}
	if o.BrowserRefused == nil {
		o.BrowserRefused = func(string, string) {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /top", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := o.authorized(w, r, "top"); ok {
			serveTop(w, r, o)
		}
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		if who, ok := o.authorized(w, r, "reset"); ok {
			serveReset(w, r, o, who)
		}
	})
	mux.HandleFunc("GET /rlqs", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := o.authorized(w, r, "rlqs"); ok {
			serveRLQS(w, r, o)
		}
	})
	return mux
}

// authorized refuses r as a browser's, and checks its bearer token,
// answering 403, 415 or 401 itself when it is refused. who names the
// caller for the log: the token's name, and the peer's address.
func (o AdminOptions) authorized(w http.ResponseWriter, r *http.Request, endpoint string) (who string, ok bool) {
	if why := refuseBrowser(w, r, r.Method == http.MethodPost); why != "" {
		o.BrowserRefused(endpoint, why)
		o.Log.Debug("admin call refused as a browser's", zap.String("endpoint", endpoint), zap.String("reason", why),
			zap.String("peer", r.RemoteAddr), zap.String("origin", r.Header.Get("Origin")), zap.String("host", r.Host))
		return "", false
	}
	if o.Tokens == nil {
		return "peer " + r.RemoteAddr, true
	}
	name, ok := bearer(r, o.Tokens())
	if !ok {
		o.Counted(endpoint, AdminUnauthorized)
		o.Log.Debug("admin call refused: no valid bearer token", zap.String("endpoint", endpoint), zap.String("peer", r.RemoteAddr))
		w.Header().Set("WWW-Authenticate", `Bearer realm="envoy-rls admin"`)
		httpError(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer TOKEN, a token of -admin-token-file)")
		return "", false
	}
	return "token " + name + " from " + r.RemoteAddr, true
}

func serveTop(w http.ResponseWriter, r *http.Request, o AdminOptions) {
	n := DefaultTop
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxTop {
			o.Counted("top", AdminBadRequest)
			httpError(w, http.StatusBadRequest, fmt.Sprintf("n=%q: want a number of descriptors per rule from 1 to %d", s, MaxTop))
			return
		}
		n = v
	}
	o.Counted("top", AdminOK)
	writeJSON(w, http.StatusOK, o.Board.Report(time.Now(), n))
}

// serveReset resets the one descriptor of the body: 200 with what was
// cleared, 404 when no limit counts it, 400 for a bad body, 503 when the
// store failed (part may be cleared: resetting again is harmless).
func serveReset(w http.ResponseWriter, r *http.Request, o AdminOptions, who string) {
	var req rlsv3.RateLimitRequest
	if !readRequest(w, r, Options{Bodies: o.Bodies}, &req) {
		o.Counted("reset", AdminBadRequest)
		return
	}
	if n := len(req.GetDescriptors()); n != 1 {
		o.Counted("reset", AdminBadRequest)
		httpError(w, http.StatusBadRequest, fmt.Sprintf("got %d descriptors: one descriptor per reset", n))
		return
	}
	var entries []descriptors.Entry
	for _, e := range req.Descriptors[0].GetEntries() {
		entries = append(entries, descriptors.Entry{Key: e.GetKey(), Value: e.GetValue()})
	}
	log := o.Log.With(zap.String("who", who), zap.String("domain", req.GetDomain()),
		zap.String("descriptor", topk.Describe(entries, o.HashValues)))
	done, err := o.Resetter.Reset(r.Context(), req.GetDomain(), entries)
	var nl *rls.NoLimitError
	switch {
	case errors.As(err, &nl):
		o.Counted("reset", AdminNotFound)
		log.Info("reset asked of a descriptor no limit counts", zap.String("reason", nl.Reason))
		httpError(w, http.StatusNotFound, err.Error())
	case err != nil && len(done.Limits) == 0 && refusedStatus(err) == http.StatusServiceUnavailable:
		o.Counted("reset", AdminError)
		httpError(w, http.StatusServiceUnavailable, err.Error())
	case err != nil && len(done.Limits) == 0:
		o.Counted("reset", AdminBadRequest)
		httpError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		o.Counted("reset", AdminError)
		log.Warn("reset failed", zap.Error(err))
		httpError(w, http.StatusServiceUnavailable, err.Error())
	default:
		o.Counted("reset", AdminOK)
		names := make([]string, len(done.Limits))
		for i, l := range done.Limits {
			names[i] = l.Name
		}
		log.Info("reset", zap.String("node", done.Node), zap.Strings("limits", names))
		writeJSON(w, http.StatusOK, done)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away
}

// bearer checks the token r presents as `Authorization: Bearer TOKEN`
// against tokens, and returns its name.
func bearer(r *http.Request, tokens *Tokens) (string, bool) {
	presented, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	name, ok := tokens.check(strings.TrimSpace(presented))
	return name, hasBearer && ok
}

// MinTokenLen is the shortest token ParseTokens accepts.
const MinTokenLen = 16

// Tokens are the bearer tokens the admin endpoints accept, each with a
// name for the log. They are kept as SHA-256 sums and compared in
// constant time, so that neither a token's bytes nor its length leak
// through the time a refusal takes.
type Tokens struct {
	names []string
	sums  [][sha256.Size]byte
}

// ParseTokens reads a token file: one token a line, as `TOKEN` or `NAME
// TOKEN` (the name is what the log says of whoever used it; without one,
// "line N"); blank lines and lines starting with # are skipped. A file
// without a token, or with one shorter than MinTokenLen, is an error.
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		name, tok := "line "+strconv.Itoa(line), fields[0]
		switch len(fields) {
		case 1:
		case 2:
			name, tok = fields[0], fields[1]
		default:
			return nil, fmt.Errorf("line %d: want TOKEN or NAME TOKEN, got %d words", line, len(fields))
		}
		if len(tok) < MinTokenLen {
			return nil, fmt.Errorf("line %d: the token is %d characters, fewer than %d", line, len(tok), MinTokenLen)
		}
		t.names = append(t.names, name)
		t.sums = append(t.sums, sha256.Sum256([]byte(tok)))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.sums) == 0 {
		return nil, errors.New("no token in the file")
	}
	return t, nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.sums) }

// check reports whether presented is one of the tokens, and its name. It
// compares against every token, whichever matches.
func (t *Tokens) check(presented string) (string, bool) {
	if t == nil || presented == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(presented))
	found := -1
	for i := range t.sums {
		if subtle.ConstantTimeCompare(sum[:], t.sums[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.names[found], true
}
