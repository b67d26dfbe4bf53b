// Package app is the application of the layered example
// (examples/layered, docs/layers.md): the service behind Envoy that
// knows its users, which the edge does not, and so enforces the finer,
// per-user limit through envoy-rls with the Go client's HTTP middleware,
// while Envoy keeps the coarse per-address limit.
//
// Authentication here is a stand-in, fit for an example only: a client
// says who it is with "Authorization: Bearer <user>", and the name is
// accepted when it is in the users list. There is no secret. A real
// application puts its own authentication (a session, a verified token)
// in authenticate's place; the limit needs only the user it yields.
package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// Domain is the envoy-rls domain of the application's limits
// (config/limits-app.yaml). Envoy's filter sends domain edge; the two
// never share a counter.
const Domain = "app"

// UserKey is the descriptor key of the per-user limit: each request asks
// for [user=<name>].
const UserKey = "user"

// HealthPath answers 200 without authentication or limit, for probes
// (Envoy's /healthz route skips its rate limit filter too).
const HealthPath = "/healthz"

// LoginPath is where a user logs in: public, since it is where
// credentials are had, and limited at the edge only (config/envoy.yaml's
// /login route limits logins by address and by user).
const LoginPath = "/login"

// LoginFailedHeader marks a failed login's answer: Envoy's /login route
// charges it to the address's lockout when the response is done
// (config/envoy.yaml, login-lockout in config/limits.yaml).
const LoginFailedHeader = "X-Login-Failed"

// userContextKey carries the authenticated user from authenticate to the
// middleware's describe and to the handler.
type userContextKey struct{}

// User is the authenticated user of a request that passed authenticate.
func User(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userContextKey{}).(string)
	return u, ok
}

// Handler is the whole application: /healthz, POST /login, then, for
// every other path, authentication (401 without a known user), the per-user limit
// (429 with Retry-After when the user is over it), and the answer. Its
// responses to an authenticated user carry the rate-limit headers of the
// user's limit. rls is shared by all requests; it is safe for that. log
// hears of the requests envoy-rls did not decide: those the failure mode
// decided, and a descriptor the service refused as invalid (a 500).
func Handler(rls *client.Client, users Users, log *zap.Logger) http.Handler {
	limit := client.HTTPMiddleware(rls, Domain, describe,
		client.OnDecision(func(r *http.Request, d client.Decision) {
			if d.Unavailable != nil {
				log.Warn("envoy-rls did not answer; the failure mode decided",
					zap.Bool("allowed", d.Allowed), zap.String("path", r.URL.Path), zap.Error(d.Unavailable))
			}
		}),
		client.OnError(func(r *http.Request, err error) {
			log.Error("rate limit check failed", zap.String("path", r.URL.Path), zap.Error(err))
		}))
	mux := http.NewServeMux()
	mux.HandleFunc(HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("POST "+LoginPath, login(users))
	mux.Handle("/", authenticate(users, limit(http.HandlerFunc(hello))))
	return mux
}

// describe is the per-user descriptor of an authenticated request. None
// for a request without a user, which authenticate never lets through:
// the middleware would then serve it unlimited, so this is the one place
// a change that reorders them would show.
func describe(r *http.Request) []client.Descriptor {
	u, ok := User(r.Context())
	if !ok {
		return nil
	}
	return []client.Descriptor{{{Key: UserKey, Value: u}}}
}

// authenticate lets a request with a known user through to next, the
// user in its context; any other gets 401 and a WWW-Authenticate
// challenge, before the limit is asked: an unknown caller costs no call
// to envoy-rls and no user's budget.
func authenticate(users Users, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := bearerUser(r.Header.Get("Authorization"))
		if !ok || !users.Has(u) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="layered example"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <user>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userContextKey{}, u)))
	})
}

// bearerUser is the name of "Bearer <name>" (the scheme case-insensitive,
// as RFC 9110 has it), or false for any other Authorization.
func bearerUser(authorization string) (string, bool) {
	scheme, name, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	name = strings.TrimSpace(name)
	return name, name != ""
}

// login stands in for a login form: the user is named by the x-user
// header (the one config/envoy.yaml's /login route counts by, which a
// real form sends beside its body) and, in this example, needs no
// password. A known user is told the credentials to send; an unknown one
// gets 401 and the header that makes Envoy count a failed login.
func login(users Users) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := r.Header.Get("X-User")
		if !users.Has(u) {
			w.Header().Set(LoginFailedHeader, "1")
			http.Error(w, "login failed", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "logged in: send Authorization: Bearer %s\n", u)
	})
}

// hello is the application's answer to an allowed request.
func hello(w http.ResponseWriter, r *http.Request) {
	u, _ := User(r.Context())
	fmt.Fprintf(w, "hello %s\n", u)
}
