package explain

import (
	"fmt"
	"io"
	"net/http"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// ResetArgs is the usage of `envoy-rls reset` after its name.
const ResetArgs = "[-addr URL] [-admin-token-file PATH] -domain DOMAIN key=value..."

const resetAbout = `Asks a running server's POST /reset to clear the state of every limit one
descriptor (the key=value arguments, in order) is decided by: the next
request with it is decided as a new client's, on every instance sharing
the server's Redis. -admin-token-file is the server's (its
RLS_ADMIN_TOKEN_FILE applies): the first token in it is sent.

  envoy-rls reset -admin-token-file token -domain edge remote_address=203.0.113.7

Exit 0 when cleared, 1 when the server cannot be asked, refuses, or no
limit counts the descriptor (the reason is printed), 2 on a usage error.
`

// ResetCommand is `envoy-rls reset`.
func ResetCommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls reset", ResetArgs, resetAbout)
	cl.Env = true
	cl.NoEnv = map[string]bool{"addr": true, "domain": true, "json": true} // the server's twins only
	addr := cl.FS.String("addr", "http://127.0.0.1:8080", "the server's admin endpoints: its -http-addr, or its -admin-addr")
	tokenFile := cl.FS.String("admin-token-file", "", "the server's token file, or a file holding one token")
	domain := cl.FS.String("domain", "", "the limits domain of the descriptor (required)")
	asJSON := cl.FS.Bool("json", false, "print the server's JSON answer")
	rest, err := cl.Parse(args, lookupEnv)
	var body []byte
	if err == nil {
		body, err = resetBody(*domain, rest)
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	answer, err := callAdmin(http.MethodPost, *addr, "/reset", *tokenFile, body)
	return printAnswer(cl, answer, err, *asJSON, "a reset's", writeReset, stdout, stderr)
}

// writeReset prints what a reset cleared.
func writeReset(w io.Writer, done rls.ResetDone) {
	fmt.Fprintf(w, "cleared in %s, node %s:\n", done.Domain, done.Node)
	for _, l := range done.Limits {
		fmt.Fprintf(w, "  %s (%s) %s\n", l.Name, l.Algorithm, l.Key)
	}
}

// resetBody is the RateLimitRequest, in protobuf JSON, of one descriptor
// of domain made of the key=value args.
func resetBody(domain string, args []string) ([]byte, error) {
	if domain == "" {
		return nil, fmt.Errorf("-domain is required")
	}
	d, err := descriptorOf(args)
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(&rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
}
