package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/xds"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// CallArgs is the usage of `envoy-rls call` after its name.
const CallArgs = "[-addr HOST:PORT] -domain DOMAIN [-hits N] [-refund] key=value... [+ key=value...]"

// Exit statuses of `envoy-rls call`; 2 is a usage error, as for every
// command.
const (
	CallOK        = 0
	CallError     = 1
	CallOverLimit = 3
)

const callAbout = `Sends one ShouldRateLimit to a running server over gRPC, as Envoy does, and
prints the answer: the overall code, each descriptor's status (its code,
the limit that decided it, what remains and when it resets) and the
headers the answer asks Envoy to add. The hits are charged as Envoy's
would be: this is a real decision, not a peek (-hits 0 is one).

The entries are key=value arguments, in order, one descriptor; a lone +
starts the next descriptor:

  envoy-rls call -domain edge api_key=k1
  envoy-rls call -domain edge remote_address=10.0.0.1 + api_key=k1 plan=free
  envoy-rls call -domain edge -hits 3 -refund api_key=k1    # give 3 back

-hits sets every descriptor's hits_addend; a negative -hits, or -refund,
sends a refund (is_negative_hits), which the server takes unless it runs
with -negative-hits=false. TLS: -tls-ca (or -tls, with the system's
roots) for a server with -grpc-tls-cert; -tls-cert and -tls-key for one
that requires a client certificate (-grpc-tls-client-ca).

Exit 0 when the answer is OK, 3 when it is OVER_LIMIT, 1 when the server
cannot be asked or answers an error, 2 on a usage error.
`

// callTimeout bounds the call to the server.
const callTimeout = 10 * time.Second

// callFlags are call's flags but the domain.
type callFlags struct {
	addr, domain string
	hits         int
	refund       bool
	useTLS       bool
	tls          xds.TLS
}

// CallCommand is `envoy-rls call`.
func CallCommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls call", CallArgs, callAbout)
	var f callFlags
	cl.FS.StringVar(&f.addr, "addr", "127.0.0.1:8081", "the server's -grpc-addr (unix:PATH for a unix socket)")
	cl.FS.StringVar(&f.domain, "domain", "", "the limits domain of the request (required)")
	cl.FS.IntVar(&f.hits, "hits", 1, "hits_addend of every descriptor: 0 peeks (consumes nothing), a negative number refunds that many")
	cl.FS.BoolVar(&f.refund, "refund", false, "send the hits as a refund (is_negative_hits)")
	cl.FS.BoolVar(&f.useTLS, "tls", false, "TLS, trusting the system's roots (implied by the other -tls flags)")
	cl.FS.StringVar(&f.tls.CAFile, "tls-ca", "", "PEM file of the CAs that may sign the server's certificate")
	cl.FS.StringVar(&f.tls.CertFile, "tls-cert", "", "client certificate (PEM) for a server that requires one, with -tls-key")
	cl.FS.StringVar(&f.tls.KeyFile, "tls-key", "", "private key (PEM) of -tls-cert")
	cl.FS.StringVar(&f.tls.ServerName, "tls-server-name", "", "name the server's certificate must carry (empty: the host of -addr)")
	rest, err := cl.Parse(args, lookupEnv)
	var req *rlsv3.RateLimitRequest
	if err == nil {
		req, err = f.request(rest)
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	resp, err := f.call(req)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls call:", err)
		return CallError
	}
	writeCall(stdout, req, resp)
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return CallOverLimit
	}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		return CallError
	}
	return CallOK
}

// request builds the request the flags and the entries args ask for.
func (f *callFlags) request(args []string) (*rlsv3.RateLimitRequest, error) {
	if f.domain == "" {
		return nil, errors.New("-domain is required")
	}
	hits, refund := f.hits, f.refund
	if hits < 0 {
		hits, refund = -hits, true
	}
	req := &rlsv3.RateLimitRequest{Domain: f.domain}
	groups := [][]string{nil}
	for _, a := range args {
		if a == "+" {
			groups = append(groups, nil)
			continue
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], a)
	}
	for _, g := range groups {
		d, err := descriptorOf(g)
		if err != nil {
			return nil, err
		}
		d.HitsAddend = wrapperspb.UInt64(uint64(hits))
		d.IsNegativeHits = refund
		req.Descriptors = append(req.Descriptors, d)
	}
	return req, nil
}

// call sends req to the server.
func (f *callFlags) call(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	creds := insecure.NewCredentials()
	if f.useTLS || f.tls != (xds.TLS{}) {
		tc, err := f.tls.Config()
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds), grpc.WithUserAgent("envoy-rls call"))
	if err != nil {
		return nil, fmt.Errorf("-addr %q: %w", f.addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
}

// writeCall prints the answer: the overall code, a line per descriptor
// and a line per header.
func writeCall(w io.Writer, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	fmt.Fprintf(w, "overall: %s\n", resp.GetOverallCode())
	for i, st := range resp.GetStatuses() {
		var parts []string
		if i < len(req.Descriptors) {
			for _, e := range req.Descriptors[i].Entries {
				parts = append(parts, e.Key+"="+e.Value)
			}
		}
		fmt.Fprintf(w, "[%d] %s: %s", i, strings.Join(parts, " "), st.GetCode())
		if l := st.GetCurrentLimit(); l != nil {
			name := l.GetName()
			if name == "" {
				name = "(unnamed)"
			}
			fmt.Fprintf(w, ", limit %s %d per %s, remaining %d, reset %v",
				name, l.GetRequestsPerUnit(), strings.ToLower(l.GetUnit().String()), st.GetLimitRemaining(), st.GetDurationUntilReset().AsDuration())
		} else {
			fmt.Fprint(w, ", no limit")
		}
		fmt.Fprintln(w)
	}
	writeHeaders(w, "response header", resp.GetResponseHeadersToAdd())
	writeHeaders(w, "request header", resp.GetRequestHeadersToAdd())
}

// writeHeaders prints each header as "what: name: value".
func writeHeaders(w io.Writer, what string, hs []*corev3.HeaderValue) {
	for _, h := range hs {
		fmt.Fprintf(w, "%s: %s: %s\n", what, h.GetKey(), h.GetValue())
	}
}

// descriptorOf is the descriptor of the key=value args, at least one.
func descriptorOf(args []string) (*ratelimitv3.RateLimitDescriptor, error) {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, a := range args {
		e, err := parseEntry(a)
		if err != nil {
			return nil, err
		}
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
	}
	if len(d.Entries) == 0 {
		return nil, errors.New("want key=value entries (a + only between two descriptors' entries)")
	}
	return d, nil
}

// parseEntry reads one key=value argument.
func parseEntry(a string) (descriptors.Entry, error) {
	k, v, ok := strings.Cut(a, "=")
	if !ok || k == "" {
		return descriptors.Entry{}, fmt.Errorf("entry %q: want key=value", a)
	}
	return descriptors.Entry{Key: k, Value: v}, nil
}
